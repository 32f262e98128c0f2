// Multi-head latent attention: DeepSeek-V2/V3 and LongCat-Flash (two MLA modules per layer).
// The cache holds one latent per token (kv_lora_rank + qk_rope_head_dim), shared by all query
// heads, so every rank keeps the whole latent while the query heads are split.
#include <fmt/format.h>

#include "model/families.hpp"

namespace kvactor::model_detail {

namespace {

expected<attention_shape> read_mla_shape(const build_context& ctx) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(heads, cfg.positive("num_attention_heads"));
  KVACTOR_MODEL_TRY(kv_lora_rank, cfg.positive("kv_lora_rank"));
  KVACTOR_MODEL_TRY(rope_dim, cfg.positive("qk_rope_head_dim"));
  if (kv_lora_rank + rope_dim > int32_max)
    return cfg.invalid("kv_lora_rank", fmt::format("{} + qk_rope_head_dim {} exceeds {}",
                                                   kv_lora_rank, rope_dim, int32_max));
  KVACTOR_MODEL_TRY(heads_per_rank, split_evenly("num_attention_heads", heads, ctx.tp));
  attention_shape out;
  out.num_heads_total = heads;
  out.num_kv_heads_total = 1; // the latent, not the config's num_key_value_heads
  out.num_heads = static_cast<int32_t>(heads_per_rank);
  out.num_kv_heads = 1;
  out.head_size = static_cast<int32_t>(kv_lora_rank + rope_dim);
  return out;
}

attention_layer make_mla(std::string name, int64_t index, const attention_shape& shape,
                         dtype kv_dtype) {
  auto l = make_attention(std::move(name), index, layer_kind::mla, shape, kv_dtype);
  l.head_size_v = 0; // the latent holds K and V
  return l;
}

} // namespace

status build_deepseek(const build_context& ctx, model_layout& out) {
  // The multi-token-prediction layers (num_nextn_predict_layers) are not part of the stack.
  KVACTOR_MODEL_TRY(num_layers, read_num_layers(ctx.cfg));
  KVACTOR_MODEL_TRY(shape, read_mla_shape(ctx));
  out.layers.reserve(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i)
    out.layers.push_back(make_mla(decoder_attn_name(i), i, shape, ctx.kv_dtype));
  return fill_totals(ctx, shape, out);
}

status build_longcat_flash(const build_context& ctx, model_layout& out) {
  const auto& cfg = ctx.cfg;
  // LongCat-Flash names its layer count num_layers; accept the usual name as well.
  std::string_view layers_key =
      cfg.has("num_layers") || !cfg.has("num_hidden_layers") ? "num_layers" : "num_hidden_layers";
  KVACTOR_MODEL_TRY(num_layers, read_num_layers(cfg, layers_key));
  KVACTOR_MODEL_TRY(shape, read_mla_shape(ctx));
  constexpr int32_t modules_per_layer = 2;
  out.layers.reserve(static_cast<size_t>(num_layers * modules_per_layer));
  for (int64_t i = 0; i < num_layers; ++i) {
    // Both modules of a layer bind at the layer's index; each has its own cache.
    for (int32_t j = 0; j < modules_per_layer; ++j)
      out.layers.push_back(
          make_mla(fmt::format("model.layers.{}.self_attn.{}.attn", i, j), i, shape, ctx.kv_dtype));
  }
  out.num_attn_modules = modules_per_layer;
  return fill_totals(ctx, shape, out);
}

} // namespace kvactor::model_detail
