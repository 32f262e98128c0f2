// Reference dense ops of the attention stack: RMS norm, linear, RoPE. Each is per token (no
// reduction across tokens) and sums in a fixed order, so a token's result never depends on the
// batch it is in.
#pragma once

#include <cstdint>

namespace kvactor::kernels {

/// y[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps), no weight. A zero row stays zero.
///   x, y // [num_tokens, dim]; y may alias x
void rms_norm(const float* x, int32_t num_tokens, int32_t dim, float eps, float* y);

/// y[t, o] = sum_i x[t, i] * w[o, i], summed with i ascending.
///   x // [num_tokens, in]
///   w // [out, in]: row o holds the weights of output o (so each output is one contiguous dot)
///   y // [num_tokens, out]; must not alias x
void linear(const float* x, const float* w, int32_t num_tokens, int32_t in, int32_t out, float* y);

/// Rotate-halves (GPT-NeoX) RoPE, in place, on dims [rot_offset, rot_offset + rot_dim) of every
/// head: with half = rot_dim / 2 and angle = positions[t] * theta^(-2i / rot_dim) (computed in
/// double, then cos/sin rounded to float),
///   x[i]        = x[i] * cos - x[i + half] * sin
///   x[i + half] = x[i + half] * cos + x[i] * sin          for i in [0, half)
///   x         // [num_tokens, num_heads, head_stride]
///   positions // [num_tokens]
/// REQUIRES: rot_dim even, rot_offset + rot_dim <= head_stride.
void rope(float* x, const int32_t* positions, int32_t num_tokens, int32_t num_heads,
          int32_t head_stride, int32_t rot_offset, int32_t rot_dim, float theta);

/// y = x . w^T as linear(), on OpenBLAS's sgemm when kvactor was built with it (one thread),
/// else linear() itself. The real decoder's projections use it; the synthetic stack keeps
/// linear(), whose exact sums its recorded digests depend on.
void projection(const float* x, const float* w, int32_t num_tokens, int32_t in, int32_t out,
                float* y);

/// Which projection() this build has: "openblas" or "reference".
const char* projection_backend();

/// As rope(), with the rot_dim / 2 inverse frequencies given (scaled RoPE variants compute
/// their own: Llama 3's, per-layer bases).
void rope_with_frequencies(float* x, const int32_t* positions, int32_t num_tokens,
                           int32_t num_heads, int32_t head_stride, int32_t rot_offset,
                           int32_t rot_dim, const double* inv_freq);

/// y[t, :] = rms_norm(x[t, :]) * g, with g = weight, or 1 + weight for Gemma's norms.
///   x, y // [num_tokens, dim]; y may alias x.   weight // [dim]
void weighted_rms_norm(const float* x, int32_t num_tokens, int32_t dim, float eps,
                       const float* weight, bool one_plus_weight, float* y);

} // namespace kvactor::kernels
