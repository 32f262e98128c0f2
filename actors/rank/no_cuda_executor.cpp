// make_cuda_decoder_executor in a build without CUDA: a clear error, never a crash.
#include "actors/rank/executor.hpp"

namespace kvactor {

expected<std::unique_ptr<step_executor>>
make_cuda_decoder_executor(const hf_decoder_config&, const gpu_weight_source&, int32_t,
                           std::shared_ptr<comm::communicator>, int32_t) {
  return make_error(errc::unsupported, "device: cuda: this kvactor was built without CUDA "
                                       "(nvcc not found); use --device cpu");
}

} // namespace kvactor
