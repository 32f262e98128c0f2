// This rank's weights of the synthetic stack (stack_weights.h), and attention_stack's
// construction: the slices materialised in host memory.
#include "kvactor/kernels/stack_weights.h"

#include <cmath>
#include <utility>

#include "kvactor/kernels/attention_stack.h"

namespace kvactor::kernels {

namespace {

weight_slice make_slice(weight_matrix m, int32_t layer, int64_t row_begin, int32_t ins,
                        int64_t col_begin, int32_t outs, int64_t fan_in) {
  return {m, layer, row_begin, ins, col_begin, outs, 1.0f / std::sqrt(static_cast<float>(fan_in))};
}

// The slice's elements, [outs, ins] row-major.
std::vector<float> materialise(uint64_t seed, const weight_slice& s) {
  std::vector<float> w(static_cast<size_t>(s.ins) * static_cast<size_t>(s.outs));
  for (int32_t o = 0; o < s.outs; ++o)
    for (int32_t i = 0; i < s.ins; ++i)
      w[static_cast<size_t>(o) * static_cast<size_t>(s.ins) + static_cast<size_t>(i)] =
          synthetic_uniform(seed, s.matrix, s.layer, s.row_begin + i, s.col_begin + o) * s.scale;
  return w;
}

} // namespace

layer_weight_slices layer_slices(const stack_config& cfg, const layer_geometry& g, size_t layer) {
  const int32_t hidden = cfg.hidden_size;
  const auto li = static_cast<int32_t>(layer);
  const int32_t d = g.head_size;
  layer_weight_slices s;
  s.q = make_slice(weight_matrix::q, li, 0, hidden, int64_t{g.q_head_begin} * d, g.q_heads * d,
                   hidden);
  if (g.kv_source == li) {
    if (g.mla) {
      s.k = make_slice(weight_matrix::kv_latent, li, 0, hidden, 0, d, hidden);
    } else {
      s.k = make_slice(weight_matrix::k, li, 0, hidden, int64_t{g.kv_head_begin} * d,
                       g.kv_heads * d, hidden);
      s.v = make_slice(weight_matrix::v, li, 0, hidden, int64_t{g.kv_head_begin} * g.v_size,
                       g.kv_heads * g.v_size, hidden);
    }
  }
  s.o = make_slice(weight_matrix::o, li, int64_t{g.q_head_begin} * g.v_size, g.q_heads * g.v_size,
                   0, hidden, int64_t{cfg.total_q_heads} * g.v_size);
  return s;
}

weight_slice vocab_slice(const stack_config& cfg) {
  return make_slice(weight_matrix::vocab, 0, 0, cfg.hidden_size, 0, cfg.vocab_size,
                    cfg.hidden_size);
}

std::vector<float> layer_sinks(const stack_config& cfg, const layer_geometry& g, size_t layer) {
  std::vector<float> sinks;
  if (!cfg.layers[layer].has_sinks) return sinks;
  sinks.resize(static_cast<size_t>(g.q_heads));
  for (int32_t h = 0; h < g.q_heads; ++h)
    sinks[static_cast<size_t>(h)] = synthetic_uniform(
        cfg.seed, weight_matrix::sinks, static_cast<int32_t>(layer), g.q_head_begin + h, 0);
  return sinks;
}

attention_params layer_attention_params(const stack_layer& layer, const layer_geometry& g,
                                        const float* sinks) {
  attention_params p;
  p.num_q_heads = g.q_heads;
  p.num_kv_heads = g.kv_heads;
  p.head_size = g.head_size;
  p.v_offset = g.v_offset;
  p.v_size = g.v_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(g.head_size));
  p.sliding_window = layer.sliding_window;
  p.chunk_size = layer.chunk_size;
  p.softcap = layer.softcap;
  p.sinks = sinks;
  p.causal = true;
  return p;
}

attention_stack::attention_stack(stack_config cfg) : cfg_(std::move(cfg)), geo_(plan_stack(cfg_)) {
  const uint64_t seed = cfg_.seed;
  weights_.resize(cfg_.layers.size());
  for (size_t l = 0; l < cfg_.layers.size(); ++l) {
    const layer_weight_slices s = layer_slices(cfg_, geo_[l], l);
    layer_weights& w = weights_[l];
    w.q = materialise(seed, s.q);
    if (s.k) w.k = materialise(seed, *s.k);
    if (s.v) w.v = materialise(seed, *s.v);
    w.o = materialise(seed, s.o);
    w.sinks = layer_sinks(cfg_, geo_[l], l);
  }
  vocab_ = materialise(seed, vocab_slice(cfg_));
}

attention_params attention_stack::layer_attention(size_t layer) const {
  const std::vector<float>& sinks = weights_[layer].sinks;
  return layer_attention_params(cfg_.layers[layer], geo_[layer],
                                sinks.empty() ? nullptr : sinks.data());
}

} // namespace kvactor::kernels
