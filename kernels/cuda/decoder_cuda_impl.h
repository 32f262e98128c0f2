// Internal: the state of decoder_cuda (its weights, activations, cuBLAS handle), shared by
// decoder_cuda.cpp (creation, layout) and decoder_cuda_forward.cpp (forward, sampling).
#pragma once

#include <array>
#include <vector>

#include "cublas_gemm.h"
#include "kvactor/kernels/cuda/decoder_cuda.h"
#include "kvactor/kernels/cuda/paged_attention_cuda.h"

namespace kvactor::kernels {

constexpr size_t decoder_tensor_kinds = 14;

struct decoder_cuda::impl : cuda_detail::device_allocations {
  decoder_spec spec;
  decoder_cuda_options opt;
  int32_t sample_rows = 0;

  cublasHandle_t blas = nullptr;

  // Weights: the global tensors (embed, lm_head, final_norm) in `global`, the rest per layer;
  // indexed by decoder_tensor.
  std::array<device_tensor, decoder_tensor_kinds> global{};
  std::vector<std::array<device_tensor, decoder_tensor_kinds>> layers;
  float* inv_freq = nullptr;    // [layers, head_dim / 2]: each layer's RoPE frequencies
  std::vector<int32_t> rot_dim; // [layers]

  // Activations for max_tokens rows.
  void* xn = nullptr;       // [max(max_tokens, sample_rows), hidden] bf16: a norm's output
  float* qkv = nullptr;     // [max_tokens, qkv rows] float
  void* q = nullptr;        // [max_tokens, q_heads * head_dim] bf16
  void* k = nullptr;        // [max_tokens, kv_heads * head_dim] bf16
  void* v = nullptr;        // [max_tokens, kv_heads * head_dim] bf16
  void* attn = nullptr;     // [max_tokens, q_heads * head_dim] bf16
  float* o = nullptr;       // [max_tokens, hidden] float: output and down projections
  float* gate_up = nullptr; // [max_tokens, 2 intermediate] float
  void* act = nullptr;      // [max_tokens, intermediate] bf16
  float* logits = nullptr;  // [sample_rows, vocab] float
  int32_t* rows = nullptr;  // [sample_rows]
  int32_t* tokens = nullptr;
  cuda_workspace attention_ws;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() {
    if (blas != nullptr) (void)cublasDestroy(blas);
  }

  int32_t qkv_rows() const { return (spec.num_q_heads + 2 * spec.num_kv_heads) * spec.head_dim; }
  const device_tensor& at(size_t layer, decoder_tensor t) const {
    return layers[layer][static_cast<size_t>(t)];
  }
  const float* vec(size_t layer, decoder_tensor t) const {
    return static_cast<const float*>(at(layer, t).data);
  }
  attention_params attention(size_t layer) const;
};

} // namespace kvactor::kernels
