#include "kvactor/kernels/stack_config.h"

#include <algorithm>
#include <cmath>

#include "kvactor/kernels/check.h"

namespace kvactor::kernels {

const char* to_string(stack_layer_kind kind) {
  switch (kind) {
  case stack_layer_kind::full: return "full";
  case stack_layer_kind::sliding_window: return "sliding_window";
  case stack_layer_kind::chunked_local: return "chunked_local";
  case stack_layer_kind::mla: return "mla";
  }
  return "unknown";
}

namespace {

void check_totals(const stack_config& cfg) {
  KVACTOR_CHECK(cfg.hidden_size > 0, "stack_config.hidden_size: ", cfg.hidden_size, " must be > 0");
  KVACTOR_CHECK(cfg.vocab_size > 0, "stack_config.vocab_size: ", cfg.vocab_size, " must be > 0");
  KVACTOR_CHECK(cfg.tp_size > 0, "stack_config.tp_size: ", cfg.tp_size, " must be > 0");
  KVACTOR_CHECK(cfg.tp_rank >= 0 && cfg.tp_rank < cfg.tp_size,
                "stack_config.tp_rank: ", cfg.tp_rank, " is outside [0, tp_size = ", cfg.tp_size,
                ")");
  KVACTOR_CHECK(cfg.total_q_heads > 0 && cfg.total_q_heads % cfg.tp_size == 0,
                "stack_config.total_q_heads: ", cfg.total_q_heads,
                " is not a positive multiple of tp_size ", cfg.tp_size);
  KVACTOR_CHECK(cfg.total_kv_heads > 0 && cfg.total_q_heads % cfg.total_kv_heads == 0,
                "stack_config.total_kv_heads: ", cfg.total_kv_heads,
                " does not divide total_q_heads ", cfg.total_q_heads);
  KVACTOR_CHECK(cfg.total_kv_heads % cfg.tp_size == 0 || cfg.tp_size % cfg.total_kv_heads == 0,
                "stack_config.total_kv_heads: ", cfg.total_kv_heads,
                " neither divides nor is divided by tp_size ", cfg.tp_size);
  KVACTOR_CHECK(!cfg.layers.empty(), "stack_config.layers: is empty");
}

layer_geometry plan_layer(const stack_config& cfg, const stack_layer& layer, size_t index) {
  const auto i = static_cast<int32_t>(index);
  const int32_t q_local = cfg.total_q_heads / cfg.tp_size;
  layer_geometry g;
  g.mla = layer.kind == stack_layer_kind::mla;
  KVACTOR_CHECK(layer.num_q_heads == q_local, "stack_config.layers[", i,
                "].num_q_heads: ", layer.num_q_heads,
                " is not total_q_heads / tp_size = ", q_local);
  KVACTOR_CHECK(layer.head_size > 0, "stack_config.layers[", i, "].head_size: ", layer.head_size,
                " must be > 0");
  KVACTOR_CHECK(layer.head_size_v >= 0, "stack_config.layers[", i,
                "].head_size_v: ", layer.head_size_v, " is negative");
  g.q_heads = q_local;
  g.q_head_begin = cfg.tp_rank * q_local;
  g.head_size = layer.head_size;
  if (g.mla) {
    KVACTOR_CHECK(layer.num_kv_heads == 1, "stack_config.layers[", i,
                  "].num_kv_heads: ", layer.num_kv_heads,
                  " must be 1 for MLA (one latent per token)");
    g.kv_heads = 1;
    g.v_size = layer.head_size_v > 0 ? layer.head_size_v : layer.head_size / 2;
    KVACTOR_CHECK(g.v_size > 0 && g.v_size <= layer.head_size, "stack_config.layers[", i,
                  "].head_size_v: ", g.v_size, " is outside [1, head_size = ", layer.head_size,
                  "] for MLA");
    g.v_offset = 0;
    g.content = layer.head_size;
    g.rope_offset = g.v_size;
    g.rope_dim = layer.use_rope ? layer.head_size - g.v_size : 0;
    KVACTOR_CHECK(!layer.use_rope || (g.rope_dim > 0 && g.rope_dim % 2 == 0),
                  "stack_config.layers[", i, "].head_size: ", layer.head_size,
                  " leaves a RoPE tail of ", layer.head_size - g.v_size,
                  " after head_size_v; it must be even and > 0");
  } else {
    const int32_t kv_local = std::max(1, cfg.total_kv_heads / cfg.tp_size);
    KVACTOR_CHECK(layer.num_kv_heads == kv_local, "stack_config.layers[", i,
                  "].num_kv_heads: ", layer.num_kv_heads, " is not max(1, total_kv_heads / ",
                  "tp_size) = ", kv_local);
    g.kv_heads = kv_local;
    g.kv_head_begin = cfg.total_kv_heads >= cfg.tp_size
                          ? cfg.tp_rank * kv_local
                          : cfg.tp_rank / (cfg.tp_size / cfg.total_kv_heads);
    g.v_size = layer.head_size_v > 0 ? layer.head_size_v : layer.head_size;
    g.v_offset = layer.head_size;
    g.content = layer.head_size + g.v_size;
    g.rope_dim = layer.use_rope ? layer.head_size : 0;
    KVACTOR_CHECK(!layer.use_rope || layer.head_size % 2 == 0, "stack_config.layers[", i,
                  "].head_size: ", layer.head_size, " must be even for RoPE");
  }
  const bool window = layer.kind == stack_layer_kind::sliding_window;
  const bool chunked = layer.kind == stack_layer_kind::chunked_local;
  KVACTOR_CHECK(window ? layer.sliding_window > 0 : layer.sliding_window == 0,
                "stack_config.layers[", i, "].sliding_window: ", layer.sliding_window,
                window ? " must be > 0" : " must be 0", " for a ", to_string(layer.kind), " layer");
  KVACTOR_CHECK(chunked ? layer.chunk_size > 0 : layer.chunk_size == 0, "stack_config.layers[", i,
                "].chunk_size: ", layer.chunk_size, chunked ? " must be > 0" : " must be 0",
                " for a ", to_string(layer.kind), " layer");
  KVACTOR_CHECK(std::isfinite(layer.softcap) && layer.softcap >= 0.0f, "stack_config.layers[", i,
                "].softcap: ", layer.softcap, " must be finite and >= 0");
  g.kv_source = i;
  return g;
}

// A sharing layer reads its target's cache as is, so the cache entries must have one shape.
void check_sharing(const stack_config& cfg, std::vector<layer_geometry>& geo, size_t index) {
  const auto i = static_cast<int32_t>(index);
  const int32_t target = cfg.layers[index].shares_kv_with;
  if (target == -1) return;
  KVACTOR_CHECK(target >= 0 && target < i, "stack_config.layers[", i, "].shares_kv_with: ", target,
                " is not an earlier layer");
  const auto t = static_cast<size_t>(target);
  KVACTOR_CHECK(cfg.layers[t].shares_kv_with == -1, "stack_config.layers[", i,
                "].shares_kv_with: ", target, " itself shares layer ", cfg.layers[t].shares_kv_with,
                "'s cache; name that layer instead");
  const layer_geometry& a = geo[index];
  const layer_geometry& b = geo[t];
  KVACTOR_CHECK(a.mla == b.mla && a.kv_heads == b.kv_heads && a.head_size == b.head_size
                    && a.v_size == b.v_size && a.rope_dim == b.rope_dim,
                "stack_config.layers[", i, "].shares_kv_with: ", target,
                " has a different cache entry (mla, kv heads, head_size, v size or RoPE)");
  geo[index].kv_source = target;
}

} // namespace

std::vector<layer_geometry> plan_stack(const stack_config& cfg) {
  check_totals(cfg);
  std::vector<layer_geometry> geo;
  geo.reserve(cfg.layers.size());
  for (size_t i = 0; i < cfg.layers.size(); ++i)
    geo.push_back(plan_layer(cfg, cfg.layers[i], i));
  for (size_t i = 0; i < cfg.layers.size(); ++i)
    check_sharing(cfg, geo, i);
  return geo;
}

} // namespace kvactor::kernels
