// cuBLAS for decoder_cuda (cublas_gemm.h): its failures as cuda_status, and the projection GEMM.
#include "cublas_gemm.h"

#include <nvtx3/nvToolsExtMemCudaRt.h>

#include <cstdlib>
#include <string>

#include "decoder_ops.h"

namespace kvactor::kernels::cuda_detail {

namespace {

// compute-sanitizer's initcheck does not see the stores of cuBLAS's Hopper GEMM kernels: every
// later read of their output is reported as uninitialised (shown with cuBLAS alone on the H200,
// bench/RESULTS.md). Telling it through NVTX that the output is written keeps initcheck useful
// for kvactor's own kernels. Without a tool attached the call returns at once.
void mark_written(void* y, size_t bytes, cublasHandle_t handle) {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("kvactor");
  cudaStream_t stream = nullptr;
  if (cublasGetStream(handle, &stream) != CUBLAS_STATUS_SUCCESS) return;
  nvtxMemVirtualRangeDesc_t range{bytes, y};
  nvtxMemMarkInitializedBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof batch;
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof range;
  batch.regionDescElements = &range;
  nvtxMemCudaMarkInitialized(domain, stream, 0, &batch);
}

// The plain kernel on the handle's stream, where cuBLAS would have run.
cuda_status plain_gemm(cublasHandle_t handle, element_type type, const void* w, const void* x,
                       float* y, int32_t num_tokens, int32_t in, int32_t out) {
  cudaStream_t stream = nullptr;
  KVACTOR_CUBLAS_CALL(cublasGetStream(handle, &stream));
  return launch_plain_gemm(type == element_type::bf16, w, x, y, num_tokens, in, out, stream);
}

} // namespace

cuda_status cublas_call_failed(cublasStatus_t status, const char* call, const char* file,
                               int line) {
  cudaError_t code = cudaErrorUnknown;
  switch (status) {
  case CUBLAS_STATUS_ALLOC_FAILED: code = cudaErrorMemoryAllocation; break;
  case CUBLAS_STATUS_NOT_INITIALIZED: code = cudaErrorInitializationError; break;
  case CUBLAS_STATUS_INVALID_VALUE: code = cudaErrorInvalidValue; break;
  case CUBLAS_STATUS_ARCH_MISMATCH:
  case CUBLAS_STATUS_NOT_SUPPORTED: code = cudaErrorNotSupported; break;
  default: break;
  }
  return detail::call_failed(code, call, file, line, cublasGetStatusString(status),
                             cublasGetStatusName(status));
}

cuda_status parse_projection_gemm(const char* value, projection_gemm* out) {
  const std::string v = value == nullptr ? "" : value;
  if (v.empty() || v == "cublas") {
    *out = projection_gemm::cublas;
  } else if (v == "plain") {
    *out = projection_gemm::plain;
  } else {
    return cuda_status::failure(cudaErrorInvalidValue,
                                "KVACTOR_GEMM=\"" + v
                                    + "\": expected cublas (the default) or plain");
  }
  return {};
}

cuda_status selected_projection_gemm(projection_gemm* out) {
  static projection_gemm choice = projection_gemm::cublas;
  static const cuda_status status = parse_projection_gemm(std::getenv("KVACTOR_GEMM"), &choice);
  *out = choice;
  return status;
}

cuda_status gemm(cublasHandle_t handle, element_type type, const void* w, const void* x, float* y,
                 int32_t num_tokens, int32_t in, int32_t out) {
  if (num_tokens == 0) return {};
  projection_gemm which = projection_gemm::cublas;
  if (auto st = selected_projection_gemm(&which); !st) return st;
  // The plain kernel is kvactor's: initcheck sees its stores (and an output it skips).
  if (which == projection_gemm::plain)
    return plain_gemm(handle, type, w, x, y, num_tokens, in, out);
  // Column-major view: y^T [out, T] = (w^T [in, out])^T . x^T [in, T].
  const cudaDataType_t t = type == element_type::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  KVACTOR_CUBLAS_CALL(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, num_tokens, in, &one, w,
                                   t, in, x, t, in, &zero, y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  mark_written(y, static_cast<size_t>(num_tokens) * static_cast<size_t>(out) * sizeof(float),
               handle);
  return {};
}

} // namespace kvactor::kernels::cuda_detail
