// Decoder-only families with ordinary attention: Llama, Mistral, Qwen2/3, Phi-3, gpt-oss, Llama-4.
#include <fmt/format.h>

#include "model/families.hpp"

namespace kvactor::model_detail {

namespace {

/// Which layers slide when the config has no layer_types, by the rules of each family's
/// transformers model definition.
expected<std::vector<bool>> default_sliding_layers(const config_reader& cfg, int64_t num_layers) {
  const auto& type = cfg.model_type();
  std::vector<bool> sliding(static_cast<size_t>(num_layers), false);
  if (type == "mistral" || type == "phi3") {
    // A non-null sliding_window applies to every layer.
    if (cfg.has("sliding_window")) sliding.assign(sliding.size(), true);
  } else if (type == "qwen2" || type == "qwen3") {
    // The window is off unless use_sliding_window; then only the layers from
    // max_window_layers on slide (the lower ones stay full).
    KVACTOR_MODEL_TRY(use_window, cfg.boolean_or("use_sliding_window", false));
    if (use_window) {
      KVACTOR_MODEL_TRY(first_sliding, cfg.non_negative("max_window_layers", max_layers));
      for (int64_t i = first_sliding; i < num_layers; ++i)
        sliding[static_cast<size_t>(i)] = true;
    }
  }
  return sliding;
}

} // namespace

static expected<std::vector<bool>> llama_sliding_layers(const config_reader& cfg,
                                                        int64_t num_layers) {
  if (cfg.has("layer_types")) return read_sliding_layer_types(cfg, num_layers);
  return default_sliding_layers(cfg, num_layers);
}

status build_llama_like(const build_context& ctx, model_layout& out) {
  return build_sliding_stack(ctx, out, llama_sliding_layers);
}

status build_gpt_oss(const build_context& ctx, model_layout& out) {
  if (auto st = build_sliding_stack(ctx, out, sliding_types_or_alternating); !st) return st;
  for (auto& l : out.layers)
    l.has_sinks = true;
  return ok();
}

status build_llama4(const build_context& ctx, model_layout& out) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(num_layers, read_num_layers(cfg));
  KVACTOR_MODEL_TRY(shape, read_attention_shape(ctx));
  // no_rope_layers[i] == 1: layer i uses RoPE (and the chunked local window);
  // 0: a global NoPE layer attending to everything. An absent or empty list falls back to
  // transformers' rule: every no_rope_layer_interval-th layer (default 4) is NoPE.
  std::vector<int64_t> listed;
  if (cfg.has("no_rope_layers")) {
    KVACTOR_MODEL_TRY(l, cfg.integers("no_rope_layers"));
    listed = std::move(l);
  }
  std::vector<bool> uses_rope;
  if (!listed.empty()) {
    if (static_cast<int64_t>(listed.size()) != num_layers)
      return cfg.invalid("no_rope_layers", fmt::format("has {} entries but there are {} layers",
                                                       listed.size(), num_layers));
    for (size_t i = 0; i < listed.size(); ++i) {
      auto v = listed[i];
      if (v != 0 && v != 1)
        return cfg.invalid(fmt::format("no_rope_layers[{}]", i),
                           fmt::format("{} must be 0 (NoPE) or 1 (RoPE)", v));
      uses_rope.push_back(v == 1);
    }
  } else {
    KVACTOR_MODEL_TRY(interval, cfg.positive_or("no_rope_layer_interval", 4));
    for (int64_t i = 0; i < num_layers; ++i)
      uses_rope.push_back((i + 1) % interval != 0);
  }
  // Without attention_chunk_size the RoPE layers attend globally too.
  int64_t chunk = 0;
  if (cfg.has("attention_chunk_size")) {
    KVACTOR_MODEL_TRY(c, cfg.positive("attention_chunk_size"));
    chunk = c;
  }
  out.layers.reserve(uses_rope.size());
  for (int64_t i = 0; i < num_layers; ++i) {
    bool rope = uses_rope[static_cast<size_t>(i)];
    auto kind = rope && chunk > 0 ? layer_kind::chunked_local : layer_kind::full;
    auto l = make_attention(decoder_attn_name(i), i, kind, shape, ctx.kv_dtype);
    l.use_rope = rope;
    if (kind == layer_kind::chunked_local) l.attention_chunk_size = static_cast<int32_t>(chunk);
    out.layers.push_back(std::move(l));
  }
  return fill_totals(ctx, shape, out);
}

} // namespace kvactor::model_detail
