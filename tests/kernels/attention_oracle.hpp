// Test oracle: dense attention in double precision over a request's raw K/V rows (before
// paging), with the visibility rules written out as a per-key predicate.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "kvactor/kernels/float_convert.h"
#include "kvactor/kernels/kv_cache_view.h"
#include "kvactor/kernels/paged_attention.h"

namespace kvactor::kernels::test {

inline bool key_visible(const attention_params& p, int32_t pos, int32_t key) {
  if (p.causal && key > pos) return false;
  if (p.sliding_window > 0) {
    const int32_t dist = p.causal ? pos - key : std::abs(pos - key);
    if (dist >= p.sliding_window) return false;
  }
  if (p.chunk_size > 0 && key / p.chunk_size != pos / p.chunk_size) return false;
  return true;
}

/// One query token's output.
///   rows // [seq_len, num_kv_heads, content] the request's cache entries as written
///   q    // [num_q_heads, head_size]
///   out  // [num_q_heads, v_size]
inline void naive_attention(const attention_params& p, const std::vector<float>& rows,
                            int32_t content, int32_t seq_len, int32_t pos, const float* q,
                            float* out) {
  const int32_t group = p.num_q_heads / p.num_kv_heads;
  for (int32_t h = 0; h < p.num_q_heads; ++h) {
    const int32_t kvh = h / group;
    std::vector<double> s;
    std::vector<int32_t> keys;
    for (int32_t j = 0; j < seq_len; ++j) {
      if (!key_visible(p, pos, j)) continue;
      const float* k = rows.data() + (int64_t{j} * p.num_kv_heads + kvh) * content;
      double dot = 0.0;
      for (int32_t d = 0; d < p.head_size; ++d)
        dot += double{q[int64_t{h} * p.head_size + d]} * k[d];
      dot *= p.scale;
      if (p.softcap > 0.0f) dot = p.softcap * std::tanh(dot / p.softcap);
      s.push_back(dot);
      keys.push_back(j);
    }
    double m = -INFINITY;
    for (double x : s)
      m = std::max(m, x);
    if (p.sinks) m = std::max(m, double{p.sinks[h]});
    double denom = p.sinks ? std::exp(p.sinks[h] - m) : 0.0;
    std::vector<double> acc(static_cast<size_t>(p.v_size), 0.0);
    for (size_t n = 0; n < s.size(); ++n) {
      const double w = std::exp(s[n] - m);
      denom += w;
      const float* v =
          rows.data() + (int64_t{keys[n]} * p.num_kv_heads + kvh) * content + p.v_offset;
      for (int32_t d = 0; d < p.v_size; ++d)
        acc[static_cast<size_t>(d)] += w * v[d];
    }
    for (int32_t d = 0; d < p.v_size; ++d)
      out[int64_t{h} * p.v_size + d] = static_cast<float>(acc[static_cast<size_t>(d)] / denom);
  }
}

/// `n` uniform values in [lo, hi), from a fixed generator.
inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(rng);
  return v;
}

/// The value x has once stored in a cache of element type `t` (FP8: with per-tensor `scale`).
inline float round_to(element_type t, float x, float scale = 1.0f) {
  switch (t) {
  case element_type::bf16: return bf16_to_float(float_to_bf16(x));
  case element_type::f16: return f16_to_float(float_to_f16(x));
  case element_type::fp8_e4m3: return fp8_dequantize(fp8_quantize(x, scale), scale);
  case element_type::f32: break;
  }
  return x;
}

} // namespace kvactor::kernels::test
