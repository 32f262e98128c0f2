// The pieces every model family shares: heads and their split, layer_types, names.
#include <fmt/format.h>

#include "model/families.hpp"

namespace kvactor::model_detail {

expected<attention_shape> read_attention_shape(const build_context& ctx,
                                               const attention_fields& fields) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(heads, cfg.positive(fields.heads));
  int64_t kv_heads = heads;
  auto kv_field = fields.heads;
  if (!fields.kv_heads.empty()) {
    KVACTOR_MODEL_TRY(kv, cfg.positive_or(fields.kv_heads, heads));
    kv_heads = kv;
    kv_field = fields.kv_heads;
  }
  if (kv_heads > heads)
    return cfg.invalid(fields.kv_heads,
                       fmt::format("{} exceeds {} {}", kv_heads, fields.heads, heads));
  if (heads % kv_heads != 0)
    return cfg.invalid(kv_field, fmt::format("{} does not divide {} {} (grouped-query attention "
                                             "gives every KV head as many query heads)",
                                             kv_heads, fields.heads, heads));
  if (cfg.has(fields.hidden)) { // checked even where head_dim makes it unneeded here
    KVACTOR_MODEL_TRY(hidden, cfg.positive(fields.hidden));
    (void)hidden;
  }
  int64_t head_size = 0;
  if (cfg.has("head_dim")) {
    KVACTOR_MODEL_TRY(dim, cfg.positive("head_dim", max_head_dim));
    head_size = dim;
  } else {
    KVACTOR_MODEL_TRY(hidden, cfg.positive(fields.hidden));
    if (hidden % heads != 0)
      return cfg.invalid(fields.hidden,
                         fmt::format("{} is not divisible by {} {} (and there is no head_dim)",
                                     hidden, fields.heads, heads));
    head_size = hidden / heads;
    if (head_size > max_head_dim)
      return cfg.invalid(fields.hidden,
                         fmt::format("{} / {} {} gives heads of {}, wider than {} (and there is "
                                     "no head_dim)",
                                     hidden, fields.heads, heads, head_size, max_head_dim));
  }
  KVACTOR_MODEL_TRY(heads_per_rank, split_evenly(fields.heads, heads, ctx.tp));
  KVACTOR_MODEL_TRY(kv_per_rank, split_kv_heads(kv_field, kv_heads, ctx.tp));
  attention_shape out;
  out.num_heads_total = heads;
  out.num_kv_heads_total = kv_heads;
  out.num_heads = static_cast<int32_t>(heads_per_rank);
  out.num_kv_heads = static_cast<int32_t>(kv_per_rank);
  out.head_size = static_cast<int32_t>(head_size);
  return out;
}

expected<std::vector<bool>> read_sliding_layer_types(const config_reader& cfg, int64_t num_layers) {
  KVACTOR_MODEL_TRY(types, cfg.strings("layer_types"));
  if (static_cast<int64_t>(types.size()) != num_layers)
    return cfg.invalid("layer_types", fmt::format("has {} entries but there are {} layers",
                                                  types.size(), num_layers));
  std::vector<bool> sliding;
  sliding.reserve(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    const auto& t = types[i];
    if (t == "sliding_attention") {
      sliding.push_back(true);
    } else if (t == "full_attention") {
      sliding.push_back(false);
    } else {
      return cfg.invalid(fmt::format("layer_types[{}]", i),
                         fmt::format("unknown value '{}' (expected sliding_attention or "
                                     "full_attention)",
                                     t));
    }
  }
  return sliding;
}

expected<std::vector<bool>> sliding_types_or_alternating(const config_reader& cfg,
                                                         int64_t num_layers) {
  if (cfg.has("layer_types")) return read_sliding_layer_types(cfg, num_layers);
  std::vector<bool> sliding;
  for (int64_t i = 0; i < num_layers; ++i)
    sliding.push_back(i % 2 == 0);
  return sliding;
}

status build_sliding_stack(const build_context& ctx, model_layout& out, sliding_rule rule) {
  KVACTOR_MODEL_TRY(num_layers, read_num_layers(ctx.cfg));
  KVACTOR_MODEL_TRY(shape, read_attention_shape(ctx));
  KVACTOR_MODEL_TRY(sliding, rule(ctx.cfg, num_layers));
  KVACTOR_MODEL_TRY(window, read_window_if_needed(ctx.cfg, sliding));
  out.layers = make_decoder_stack(sliding, window, shape, ctx.kv_dtype);
  return fill_totals(ctx, shape, out);
}

expected<int32_t> read_window_if_needed(const config_reader& cfg,
                                        const std::vector<bool>& sliding) {
  bool any = false;
  for (bool s : sliding)
    any = any || s;
  if (!any) return 0;
  KVACTOR_MODEL_TRY(window, cfg.positive("sliding_window"));
  return static_cast<int32_t>(window);
}

expected<int64_t> read_num_layers(const config_reader& cfg, std::string_view key) {
  return cfg.positive(key, max_layers);
}

std::string decoder_attn_name(int64_t i) {
  return fmt::format("model.layers.{}.self_attn.attn", i);
}

attention_layer make_attention(std::string name, int64_t index, layer_kind kind,
                               const attention_shape& shape, dtype kv_dtype) {
  attention_layer l;
  l.name = std::move(name);
  l.index = static_cast<int32_t>(index);
  l.kind = kind;
  l.num_heads = shape.num_heads;
  l.num_kv_heads = shape.num_kv_heads;
  l.head_size = shape.head_size;
  l.head_size_v = shape.head_size;
  l.kv_dtype = kv_dtype;
  return l;
}

std::vector<attention_layer> make_decoder_stack(const std::vector<bool>& sliding, int32_t window,
                                                const attention_shape& shape, dtype kv_dtype) {
  std::vector<attention_layer> layers;
  layers.reserve(sliding.size());
  for (size_t i = 0; i < sliding.size(); ++i) {
    auto kind = sliding[i] ? layer_kind::sliding_window : layer_kind::full;
    auto l = make_attention(decoder_attn_name(static_cast<int64_t>(i)), static_cast<int64_t>(i),
                            kind, shape, kv_dtype);
    if (sliding[i]) l.sliding_window = window;
    layers.push_back(std::move(l));
  }
  return layers;
}

status fill_totals(const build_context& ctx, const attention_shape& shape, model_layout& out,
                   std::string_view positions_key) {
  KVACTOR_MODEL_TRY(positions, ctx.cfg.positive(positions_key, int32_max));
  out.num_heads = static_cast<int32_t>(shape.num_heads_total);
  out.num_kv_heads = static_cast<int32_t>(shape.num_kv_heads_total);
  out.max_position_embeddings = positions;
  return ok();
}

} // namespace kvactor::model_detail
