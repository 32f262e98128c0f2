// The device runtime of a build without CUDA: there is no GPU, and it says why.
#include "kvactor/kernels/device_runtime.h"

namespace kvactor::kernels {

namespace {
constexpr const char* reason = "this kvactor was built without CUDA (nvcc not found)";
}

std::optional<gpu_info> probe_gpu(int32_t, std::string* why_not) {
  if (why_not) *why_not = reason;
  return std::nullopt;
}

int32_t gpu_count(std::string* why_not) {
  if (why_not) *why_not = reason;
  return 0;
}

bool select_gpu(int32_t, std::string* why_not) {
  if (why_not) *why_not = reason;
  return false;
}

std::optional<std::pair<int64_t, int64_t>> gpu_memory_info() {
  return std::nullopt;
}

std::unique_ptr<device_buffer> device_buffer::allocate(int64_t bytes, std::string* error) {
  if (bytes <= 0) return std::unique_ptr<device_buffer>(new device_buffer(nullptr, 0));
  if (error) *error = reason;
  return nullptr;
}

device_buffer::~device_buffer() = default;

} // namespace kvactor::kernels
