// Gemma 2, Gemma 3 and Gemma-3n: interleaved local (sliding window) and global layers;
// Gemma-3n's last layers reuse the KV cache of an earlier layer of the same type.
#include <fmt/format.h>

#include "model/families.hpp"

namespace kvactor::model_detail {

namespace {

/// Gemma 3's layer pattern: layer_types when present, else every pattern-th layer is global.
expected<std::vector<bool>> gemma3_sliding_layers(const config_reader& cfg, int64_t num_layers) {
  if (cfg.has("layer_types")) return read_sliding_layer_types(cfg, num_layers);
  // Older configs spell it sliding_window_pattern, newer ones keep it as _sliding_window_pattern.
  std::string_view key =
      cfg.has("sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
  KVACTOR_MODEL_TRY(pattern, cfg.positive_or(key, 6));
  std::vector<bool> sliding;
  sliding.reserve(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i)
    sliding.push_back((i + 1) % pattern != 0);
  return sliding;
}

expected<model_layout> gemma3_like(const build_context& ctx) {
  model_layout out;
  if (auto st = build_sliding_stack(ctx, out, gemma3_sliding_layers); !st) return st.err();
  return out;
}

} // namespace

status build_gemma2(const build_context& ctx, model_layout& out) {
  return build_sliding_stack(ctx, out, sliding_types_or_alternating);
}

status build_gemma3(const build_context& ctx, model_layout& out) {
  KVACTOR_MODEL_TRY(built, gemma3_like(ctx));
  out = std::move(built);
  return ok();
}

status build_gemma3n(const build_context& ctx, model_layout& out) {
  KVACTOR_MODEL_TRY(built, gemma3_like(ctx));
  const auto& cfg = ctx.cfg;
  auto num_layers = static_cast<int64_t>(built.layers.size());
  KVACTOR_MODEL_TRY(shared, cfg.non_negative_or("num_kv_shared_layers", 0, max_layers));
  if (shared >= num_layers)
    return cfg.invalid("num_kv_shared_layers",
                       fmt::format("{} must be fewer than the {} layers", shared, num_layers));
  // The last `shared` layers own no cache: each reads the cache of the last layer before them
  // that has the same attention type (same window, so the same KV cache spec).
  auto first_shared = num_layers - shared;
  for (int64_t i = first_shared; i < num_layers; ++i) {
    auto& layer = built.layers[static_cast<size_t>(i)];
    int64_t target = first_shared - 1;
    while (target >= 0 && built.layers[static_cast<size_t>(target)].kind != layer.kind)
      --target;
    if (target < 0)
      return cfg.invalid("num_kv_shared_layers",
                         fmt::format("{}: shared layer {} ({}) has no earlier {} layer to share "
                                     "the KV cache of",
                                     shared, i, to_string(layer.kind), to_string(layer.kind)));
    layer.kv_sharing_target = built.layers[static_cast<size_t>(target)].name;
  }
  out = std::move(built);
  return ok();
}

} // namespace kvactor::model_detail
