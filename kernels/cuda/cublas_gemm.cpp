// cuBLAS for decoder_cuda (cublas_gemm.h): its failures as cuda_status, and the projection GEMM.
#include "cublas_gemm.h"

namespace kvactor::kernels::cuda_detail {

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

cuda_status gemm(cublasHandle_t handle, element_type type, const void* w, const void* x, float* y,
                 int32_t num_tokens, int32_t in, int32_t out) {
  if (num_tokens == 0) return {};
  // Column-major view: y^T [out, T] = (w^T [in, out])^T . x^T [in, T].
  const cudaDataType_t t = type == element_type::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  KVACTOR_CUBLAS_CALL(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, num_tokens, in, &one, w,
                                   t, in, x, t, in, &zero, y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  return {};
}

} // namespace kvactor::kernels::cuda_detail
