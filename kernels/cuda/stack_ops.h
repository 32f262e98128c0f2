// Internal: the dense kernels of attention_stack_cuda (stack_ops.cu) and their launch functions.
// Compiled as C++17 by nvcc: no header of kvactor/kernels/ but cuda/cuda_check.h is included.
// Every element-typed buffer holds bf16 bits when `bf16`, else f16 bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"

namespace kvactor::kernels::cuda_detail {

/// The [outs, ins] block of a global synthetic matrix, one output per row (as stack_weights.cpp
/// slices it for linear()):
///   dst[o, i] = round(synthetic_uniform(seed, matrix, layer, row_begin + i, col_begin + o) *
///   scale)
struct weight_slice_args {
  void* dst; // [outs, ins]
  bool bf16;
  uint64_t seed, matrix;
  int32_t layer;
  int64_t row_begin, col_begin;
  int32_t ins, outs;
  float scale; // 1 / sqrt(fan_in), computed on the host as the CPU computes it
};
cuda_status launch_weight_slice(const weight_slice_args& a, cudaStream_t stream);

/// hidden[t, c] = synthetic_uniform(seed, embedding, 0, token_ids[t], c).
///   hidden    // [num_tokens, dim] float
///   token_ids // [num_tokens]
cuda_status launch_embedding(float* hidden, const int32_t* token_ids, int32_t num_tokens,
                             int32_t dim, uint64_t seed, cudaStream_t stream);

/// Per row r of the output (one CTA each), with x_r = x[rows ? rows[r] : r, :]:
///   add != nullptr: x_r += add[r, :]               (the residual add; REQUIRES rows == nullptr)
///   out != nullptr: out[r, :] = round(x_r / sqrt(mean(x_r^2) + eps))
struct add_norm_args {
  float* x;            // [*, dim] float
  const float* add;    // [num_rows, dim] float, or nullptr
  const int32_t* rows; // [num_rows] device row indices into x, or nullptr (row r is x's row r)
  void* out;           // [num_rows, dim] element type, or nullptr
  bool bf16;
  int32_t num_rows, dim;
  float eps;
};
cuda_status launch_add_norm(const add_norm_args& a, cudaStream_t stream);

/// Splits the projection output into q, k, v in the element type, RoPE applied in float to q and
/// k heads first (rotate halves on dims [rope_offset, rope_offset + rope_dim) of each head; the
/// angles in double, as rope() of dense_ops.h):
///   qkv // [num_tokens, ld] float: q [q_heads * head_size], then k [kv_heads * head_size],
///       //                          then v [kv_heads * v_size]
///   q   // [num_tokens, q_heads, head_size]
///   k   // [num_tokens, kv_heads, head_size], or nullptr with kv_heads 0
///   v   // [num_tokens, kv_heads, v_size], or nullptr with v_size 0
struct rope_split_args {
  const float* qkv;
  int64_t ld;
  void* q;
  void* k;
  void* v;
  bool bf16;
  const int32_t* positions; // [num_tokens]
  int32_t num_tokens, q_heads, kv_heads, head_size, v_size;
  int32_t rope_offset, rope_dim; // rope_dim 0: no RoPE
  float theta;
};
cuda_status launch_rope_split(const rope_split_args& a, cudaStream_t stream);

/// tokens[r] = the index of the largest logits[r, :], the lowest index winning ties.
///   logits // [num_rows, vocab] float
cuda_status launch_argmax(const float* logits, int32_t num_rows, int32_t vocab, int32_t* tokens,
                          cudaStream_t stream);

} // namespace kvactor::kernels::cuda_detail
