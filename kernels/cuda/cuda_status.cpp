#include "kvactor/kernels/cuda/cuda_check.h"

#include <string>

namespace kvactor::kernels::detail {

cuda_status cuda_call_failed(cudaError_t code, const char* call, const char* file, int line) {
  std::string msg = call;
  msg += " failed at ";
  msg += file;
  msg += ':';
  msg += std::to_string(line);
  msg += ": ";
  msg += cudaGetErrorString(code);
  msg += " (";
  msg += cudaGetErrorName(code);
  msg += ')';
  return cuda_status::failure(code, std::move(msg));
}

} // namespace kvactor::kernels::detail
