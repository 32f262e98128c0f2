// Internal: the dense kernels of decoder_cuda (decoder_ops.cu) besides cuBLAS and attention.
// Compiled as C++17 by nvcc: no header of kvactor/kernels/ but cuda/cuda_check.h is included.
// Activations handed to cuBLAS and attention are bf16; the residual stream and every GEMM output
// are float, so a value is rounded to bf16 only where a tensor core reads it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"

namespace kvactor::kernels::cuda_detail {

/// hidden[t, :] = float(embed[token_ids[t], :]) * scale; zeros for an id outside [0, vocab).
///   embed // [vocab, dim] bf16    hidden // [num_tokens, dim] float
cuda_status launch_embed(const void* embed, int32_t vocab, const int32_t* token_ids,
                         int32_t num_tokens, int32_t dim, float scale, float* hidden,
                         cudaStream_t stream);

/// Per row r (one CTA each), with x_r = x[rows ? rows[r] : r, :]:
///   add != nullptr:  x_r += add_weight ? norm(add[r, :], add_weight) : add[r, :]
///   out != nullptr:  out[r, :] = bf16(norm(x_r, weight))
/// where norm(v, w) = v / sqrt(mean(v^2) + eps) * (one_plus ? 1 + w : w).
struct residual_norm_args {
  float* x;                // [*, dim] float
  const float* add;        // [num_rows, dim] float, or nullptr (REQUIRES rows == nullptr)
  const float* add_weight; // [dim] or nullptr: add as it is
  const float* weight;     // [dim], used when out != nullptr
  const int32_t* rows;     // [num_rows] device row indices into x, or nullptr
  void* out;               // [num_rows, dim] bf16, or nullptr
  int32_t num_rows, dim;
  float eps;
  bool one_plus;
};
cuda_status launch_residual_norm(const residual_norm_args& a, cudaStream_t stream);

/// Where qkv_prepare also stores K and V: the layer's paged cache, as kv_write_cuda would (bf16
/// bits, or the FP8 codes of the bf16 values over the scales); cache == nullptr: not stored.
struct kv_store {
  void* cache = nullptr;
  bool fp8 = false;
  float k_scale = 1.0f, v_scale = 1.0f;
  int64_t stride_block = 0, stride_head = 0, stride_token = 0; // elements
  int64_t capacity = 0;                                        // num_blocks * block_size
  int32_t block_size = 0;
  const int64_t* slot_mapping = nullptr; // [num_tokens]; -1 (padding) and slots past the cache
                                         // are skipped
};

/// From the fused projection's float output to the attention's bf16 inputs, per token:
///   q, k, v = qkv[t] split (+ bias); q, k: per-head RMS norm (qk_norm weights), then RoPE
///   (rotate-half on the first rot_dim dims of each head, angle position * inv_freq[i], in float);
///   with `store`, K and V also go into the cache at the token's slot (the KV write fused).
struct qkv_prepare_args {
  const float* qkv;    // [num_tokens, (q_heads + 2 kv_heads) * head_dim] float
  const float* bias;   // [(q_heads + 2 kv_heads) * head_dim] or nullptr
  const float* q_norm; // [head_dim] or nullptr (then k_norm too)
  const float* k_norm;
  const float* inv_freq;    // [rot_dim / 2]
  const int32_t* positions; // [num_tokens]
  void* q;                  // [num_tokens, q_heads, head_dim] bf16
  void* k;                  // [num_tokens, kv_heads, head_dim] bf16
  void* v;                  // [num_tokens, kv_heads, head_dim] bf16
  int32_t num_tokens, q_heads, kv_heads, head_dim, rot_dim;
  float eps;
  bool one_plus; // qk norms as 1 + w
  kv_store store;
};
cuda_status launch_qkv_prepare(const qkv_prepare_args& a, cudaStream_t stream);

/// out[t, i] = bf16(act(gate_up[t, i]) * gate_up[t, inter + i]); act SiLU, or GELU (tanh).
///   gate_up // [num_tokens, 2 inter] float    out // [num_tokens, inter] bf16
cuda_status launch_gated_activation(const float* gate_up, int32_t num_tokens, int32_t inter,
                                    bool gelu_tanh, void* out, cudaStream_t stream);

/// The projection of a few tokens, memory-bound: y[t, o] = sum_i float(x[t, i]) * float(w[o, i]),
/// a warp per output row streaming the weights once with 16-byte loads for all the tokens
/// (skinny_gemm.cu). A row's bits do not depend on the grid or the other rows.
/// REQUIRES: 1 <= num_tokens <= skinny_max_tokens; in a positive multiple of 8; out >= 1; w, x
/// 16-byte aligned.
///   w // [out, in] bf16    x // [num_tokens, in] bf16    y // [num_tokens, out] float
constexpr int32_t skinny_max_tokens = 4;
cuda_status launch_skinny_gemm(const void* w, const void* x, float* y, int32_t num_tokens,
                               int32_t in, int32_t out, cudaStream_t stream);

/// y[t, o] = sum_i float(x[t, i]) * float(w[o, i]) at any shape, without cuBLAS and without shared
/// memory (plain_gemm.cu): the projections of a run under compute-sanitizer's racecheck
/// (KVACTOR_GEMM=plain, cublas_gemm.h). Slow; a warp per output element.
/// REQUIRES: num_tokens >= 0; in, out >= 1.
///   w // [out, in] bf16 (or f16)    x // [num_tokens, in] as w    y // [num_tokens, out] float
cuda_status launch_plain_gemm(bool bf16, const void* w, const void* x, float* y, int32_t num_tokens,
                              int32_t in, int32_t out, cudaStream_t stream);

/// The MLP's first half for a few tokens in one pass: out[t, i] = bf16(act(gate_i . x_t) *
/// (up_i . x_t)) with gate_i = gate_up row i and up_i = row inter + i, the same bits as
/// launch_skinny_gemm followed by launch_gated_activation. REQUIRES as launch_skinny_gemm.
///   gate_up // [2 inter, in] bf16    x // [num_tokens, in] bf16    out // [num_tokens, inter] bf16
cuda_status launch_skinny_gated_mlp(const void* gate_up, const void* x, void* out,
                                    int32_t num_tokens, int32_t in, int32_t inter, bool gelu_tanh,
                                    cudaStream_t stream);

/// The generated block of decoder_cuda.h's fill_generated_cuda (dst already offset).
cuda_status launch_fill_generated(void* dst, bool bf16, int64_t rows, int64_t cols,
                                  int64_t row_begin, int64_t col_begin, int64_t width, uint64_t key,
                                  float scale, float centre, cudaStream_t stream);

/// logits = cap * tanh(logits / cap) in place (cap > 0).
cuda_status launch_softcap(float* logits, int64_t count, float cap, cudaStream_t stream);

/// tokens[r] = the index of the largest logits[r, :], the lowest index winning ties.
///   logits // [num_rows, vocab] float
cuda_status launch_argmax(const float* logits, int32_t num_rows, int32_t vocab, int32_t* tokens,
                          cudaStream_t stream);

} // namespace kvactor::kernels::cuda_detail
