// Internal: cuBLAS for decoder_cuda: the projection GEMM,
// cuBLAS errors as cuda_status, and an owning device allocation.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/kv_cache_view.h"

namespace kvactor::kernels {
namespace cuda_detail {

/// "CALL failed at FILE:LINE: <cublasGetStatusString> (<cublasGetStatusName>)", with the closest
/// cudaError_t as the code (cudaErrorMemoryAllocation for CUBLAS_STATUS_ALLOC_FAILED, ...).
cuda_status cublas_call_failed(cublasStatus_t status, const char* call, const char* file, int line);

struct cuda_free_deleter {
  void operator()(void* p) const noexcept { (void)cudaFree(p); }
};
using device_memory = std::unique_ptr<void, cuda_free_deleter>;

/// A GPU stack's allocations, counted as weights or activations; freed when it is destroyed (a
/// stack's impl derives from it, so they outlive its cuBLAS handle).
struct device_allocations {
  std::vector<device_memory> memory;
  size_t weights_bytes = 0, activation_bytes = 0;

  /// cudaMalloc of `bytes` (none for 0), counted as weights or activations.
  cuda_status allocate(size_t bytes, bool weight, void** out) {
    *out = nullptr;
    if (bytes == 0) return {};
    memory.reserve(memory.size() + 1); // so that the push below cannot leak a fresh allocation
    KVACTOR_CUDA_CALL(cudaMalloc(out, bytes));
    memory.emplace_back(*out);
    (weight ? weights_bytes : activation_bytes) += bytes;
    return {};
  }
};

/// What the projections run on: cuBLAS's tensor-core GEMM (the default) or, with
/// KVACTOR_GEMM=plain, kvactor's plain kernel (decoder_ops.h's launch_plain_gemm), for
/// compute-sanitizer's racecheck: it faults when cuBLAS's Hopper GEMM runs uninstrumented, so runs
/// that instrument only kvactor's kernels or only some launches must not run cuBLAS.
enum class projection_gemm { cublas, plain };

/// KVACTOR_GEMM's value (nullptr when unset) as a choice: unset, "" or "cublas" is cuBLAS, "plain"
/// the plain kernel; anything else is an error naming the variable and the value.
cuda_status parse_projection_gemm(const char* value, projection_gemm* out);

/// This process's choice, KVACTOR_GEMM read once; its error when the value is none of the above.
cuda_status selected_projection_gemm(projection_gemm* out);

/// y[t, o] = sum_i x[t, i] * w[o, i] on the tensor cores (or the plain kernel, see above): x, w of
/// element type `type` (bf16 or f16), float accumulation and output, on the handle's stream.
///   w // [out, in]    x // [num_tokens, in]    y // [num_tokens, out]
cuda_status gemm(cublasHandle_t handle, element_type type, const void* w, const void* x, float* y,
                 int32_t num_tokens, int32_t in, int32_t out);

} // namespace cuda_detail

// KVACTOR_CUBLAS_CALL(cublasGemmEx(...)): in a function returning cuda_status, returns a failed
// status naming the call when it does not return CUBLAS_STATUS_SUCCESS.
#define KVACTOR_CUBLAS_CALL(call)                                                                  \
  do {                                                                                             \
    const cublasStatus_t kvactor_cublas_status_ = (call);                                          \
    if (kvactor_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                           \
      return ::kvactor::kernels::cuda_detail::cublas_call_failed(kvactor_cublas_status_, #call,    \
                                                                 __FILE__, __LINE__);              \
  } while (0)

} // namespace kvactor::kernels
