// Internal: the state of attention_stack_cuda (its weights, activations, cuBLAS handle), shared by
// attention_stack_cuda.cpp (creation) and attention_stack_cuda_forward.cpp (forward, sample).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cublas_gemm.h"
#include "kvactor/kernels/cuda/attention_stack_cuda.h"
#include "kvactor/kernels/cuda/paged_attention_cuda.h"

namespace kvactor::kernels {

struct attention_stack_cuda::impl : cuda_detail::device_allocations {
  struct layer {
    void* qkv = nullptr; // [q_rows + k_rows + v_rows, hidden]
    int32_t q_rows = 0, k_rows = 0, v_rows = 0;
    void* o = nullptr;      // [hidden, q_heads * v_size]
    float* sinks = nullptr; // [q_heads] or nullptr
    int32_t qkv_rows() const { return q_rows + k_rows + v_rows; }
  };

  stack_config cfg;
  std::vector<layer_geometry> geo;
  attention_stack_cuda_options opt;
  int32_t sample_rows = 0; // rows of one sampling pass

  cublasHandle_t blas = nullptr;

  std::vector<layer> layers;
  void* vocab = nullptr; // [vocab_size, hidden]

  // Activations, sized for max_tokens rows and the widest layer.
  void* xn = nullptr;        // [max(max_tokens, sample_rows), hidden] element type
  float* qkv = nullptr;      // [max_tokens, max qkv_rows] float
  void* q = nullptr;         // [max_tokens, max q_heads * head_size]
  void* k = nullptr;         // [max_tokens, max kv_heads * head_size]
  void* v = nullptr;         // [max_tokens, max kv_heads * v_size], or nullptr
  void* attn = nullptr;      // [max_tokens, max q_heads * v_size]
  float* o = nullptr;        // [max_tokens, hidden] float
  float* logits = nullptr;   // [sample_rows, vocab_size] float
  int32_t* rows = nullptr;   // [sample_rows]
  int32_t* tokens = nullptr; // [sample_rows]
  cuda_workspace attention_ws;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() {
    if (blas != nullptr) (void)cublasDestroy(blas);
  }

  bool bf16() const { return opt.dtype == element_type::bf16; }
  size_t esize() const { return element_size(opt.dtype); }
};

} // namespace kvactor::kernels
