// The GPU as the rest of kvactor sees it, in plain C++: is there one, how much memory is free,
// and device memory that frees itself. Built from kernels/device/cuda_runtime.cpp with CUDA and
// from kernels/device/no_cuda.cpp without, so callers need no #ifdef: a CPU-only build answers
// "no GPU" with the reason.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace kvactor::kernels {

struct gpu_info {
  int32_t ordinal = 0;
  std::string name;
  int32_t multiprocessors = 0;
  int32_t compute_major = 0, compute_minor = 0;
  int64_t free_bytes = 0;  // cudaMemGetInfo, now
  int64_t total_bytes = 0; // cudaMemGetInfo
};

/// The GPU `ordinal`, or nullopt with `why_not` set (no CUDA in this build, no driver, no device,
/// ordinal out of range).
std::optional<gpu_info> probe_gpu(int32_t ordinal, std::string* why_not);

/// How many CUDA devices are visible (0 with `why_not` set when none is, or without CUDA).
int32_t gpu_count(std::string* why_not);

/// Makes GPU `ordinal` the current device of the calling thread (cudaSetDevice); false with
/// `why_not` set when it cannot. Tensor-parallel rank r uses GPU r.
bool select_gpu(int32_t ordinal, std::string* why_not);

/// Free and total bytes of the current device (cudaMemGetInfo); nullopt without a GPU.
std::optional<std::pair<int64_t, int64_t>> gpu_memory_info();

/// One plain cudaMalloc (nothing managed), zero-filled, freed by the destructor.
class device_buffer {
public:
  /// nullptr and `error` set when the allocation (or the build) fails.
  static std::unique_ptr<device_buffer> allocate(int64_t bytes, std::string* error);
  ~device_buffer();
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

private:
  device_buffer(void* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

} // namespace kvactor::kernels
