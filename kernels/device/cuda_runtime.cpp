#include <cuda_runtime_api.h>

#include <sstream>

#include "kvactor/kernels/device_runtime.h"

namespace kvactor::kernels {

namespace {

std::string describe(cudaError_t e, const std::string& call) {
  std::ostringstream os;
  os << call << ": " << cudaGetErrorString(e) << " (" << cudaGetErrorName(e) << ")";
  return os.str();
}

} // namespace

std::optional<gpu_info> probe_gpu(int32_t ordinal, std::string* why_not) {
  auto fail = [&](std::string why) -> std::optional<gpu_info> {
    if (why_not) *why_not = std::move(why);
    return std::nullopt;
  };
  int count = 0;
  if (auto e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return fail(describe(e, "cudaGetDeviceCount"));
  if (count == 0) return fail("no CUDA device is visible");
  if (ordinal < 0 || ordinal >= count)
    return fail("GPU " + std::to_string(ordinal) + " does not exist (" + std::to_string(count)
                + " visible)");
  cudaDeviceProp prop{};
  if (auto e = cudaGetDeviceProperties(&prop, ordinal); e != cudaSuccess)
    return fail(describe(e, "cudaGetDeviceProperties"));
  if (auto e = cudaSetDevice(ordinal); e != cudaSuccess) return fail(describe(e, "cudaSetDevice"));
  size_t free_b = 0, total_b = 0;
  if (auto e = cudaMemGetInfo(&free_b, &total_b); e != cudaSuccess)
    return fail(describe(e, "cudaMemGetInfo"));
  gpu_info g;
  g.ordinal = ordinal;
  g.name = prop.name;
  g.multiprocessors = prop.multiProcessorCount;
  g.compute_major = prop.major;
  g.compute_minor = prop.minor;
  g.free_bytes = static_cast<int64_t>(free_b);
  g.total_bytes = static_cast<int64_t>(total_b);
  return g;
}

int32_t gpu_count(std::string* why_not) {
  int count = 0;
  if (auto e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    if (why_not) *why_not = describe(e, "cudaGetDeviceCount");
    return 0;
  }
  if (count == 0 && why_not) *why_not = "no CUDA device is visible";
  return count;
}

bool select_gpu(int32_t ordinal, std::string* why_not) {
  if (auto e = cudaSetDevice(ordinal); e != cudaSuccess) {
    if (why_not) *why_not = describe(e, "cudaSetDevice(" + std::to_string(ordinal) + ")");
    return false;
  }
  return true;
}

std::optional<std::pair<int64_t, int64_t>> gpu_memory_info() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return std::nullopt;
  return std::pair{static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
}

std::unique_ptr<device_buffer> device_buffer::allocate(int64_t bytes, std::string* error) {
  void* p = nullptr;
  if (bytes > 0) {
    if (auto e = cudaMalloc(&p, static_cast<size_t>(bytes)); e != cudaSuccess) {
      if (error) *error = describe(e, "cudaMalloc") + " of " + std::to_string(bytes) + " bytes";
      return nullptr;
    }
    if (auto e = cudaMemset(p, 0, static_cast<size_t>(bytes)); e != cudaSuccess) {
      cudaFree(p);
      if (error) *error = describe(e, "cudaMemset");
      return nullptr;
    }
  }
  return std::unique_ptr<device_buffer>(new device_buffer(p, bytes));
}

device_buffer::~device_buffer() {
  if (data_) cudaFree(data_);
}

} // namespace kvactor::kernels
