// attention_stack construction: this rank's slices of the synthetic weights.
#include <cmath>
#include <utility>

#include "kvactor/kernels/attention_stack.h"
#include "kvactor/kernels/synthetic_weights.h"

namespace kvactor::kernels {

namespace {

// The [outs, ins] block of global W (stored transposed, one output per row, for linear()):
//   w[o, i] = W[row_begin + i, col_begin + o] / sqrt(fan_in)
std::vector<float> slice(uint64_t seed, weight_matrix m, int32_t layer, int64_t row_begin,
                         int32_t ins, int64_t col_begin, int32_t outs, int64_t fan_in) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
  std::vector<float> w(static_cast<size_t>(ins) * static_cast<size_t>(outs));
  for (int32_t o = 0; o < outs; ++o)
    for (int32_t i = 0; i < ins; ++i)
      w[static_cast<size_t>(o) * static_cast<size_t>(ins) + static_cast<size_t>(i)] =
          synthetic_uniform(seed, m, layer, row_begin + i, col_begin + o) * scale;
  return w;
}

} // namespace

attention_stack::attention_stack(stack_config cfg) : cfg_(std::move(cfg)), geo_(plan_stack(cfg_)) {
  const uint64_t seed = cfg_.seed;
  const int32_t hidden = cfg_.hidden_size;
  weights_.resize(cfg_.layers.size());
  for (size_t l = 0; l < cfg_.layers.size(); ++l) {
    const layer_geometry& g = geo_[l];
    const auto li = static_cast<int32_t>(l);
    layer_weights& w = weights_[l];
    const int32_t d = g.head_size;
    w.q = slice(seed, weight_matrix::q, li, 0, hidden, int64_t{g.q_head_begin} * d, g.q_heads * d,
                hidden);
    if (g.kv_source == li) {
      if (g.mla) {
        w.k = slice(seed, weight_matrix::kv_latent, li, 0, hidden, 0, d, hidden);
      } else {
        w.k = slice(seed, weight_matrix::k, li, 0, hidden, int64_t{g.kv_head_begin} * d,
                    g.kv_heads * d, hidden);
        w.v = slice(seed, weight_matrix::v, li, 0, hidden, int64_t{g.kv_head_begin} * g.v_size,
                    g.kv_heads * g.v_size, hidden);
      }
    }
    w.o = slice(seed, weight_matrix::o, li, int64_t{g.q_head_begin} * g.v_size,
                g.q_heads * g.v_size, 0, hidden, int64_t{cfg_.total_q_heads} * g.v_size);
    if (cfg_.layers[l].has_sinks) {
      w.sinks.resize(static_cast<size_t>(g.q_heads));
      for (int32_t h = 0; h < g.q_heads; ++h)
        w.sinks[static_cast<size_t>(h)] =
            synthetic_uniform(seed, weight_matrix::sinks, li, g.q_head_begin + h, 0);
    }
  }
  vocab_ = slice(seed, weight_matrix::vocab, 0, 0, hidden, 0, cfg_.vocab_size, hidden);
}

attention_params attention_stack::layer_attention(size_t layer) const {
  const stack_layer& sl = cfg_.layers[layer];
  const layer_geometry& g = geo_[layer];
  attention_params p;
  p.num_q_heads = g.q_heads;
  p.num_kv_heads = g.kv_heads;
  p.head_size = g.head_size;
  p.v_offset = g.v_offset;
  p.v_size = g.v_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(g.head_size));
  p.sliding_window = sl.sliding_window;
  p.chunk_size = sl.chunk_size;
  p.softcap = sl.softcap;
  p.sinks = weights_[layer].sinks.empty() ? nullptr : weights_[layer].sinks.data();
  p.causal = true;
  return p;
}

} // namespace kvactor::kernels
