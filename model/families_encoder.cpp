// Models with an encoder: Whisper (encoder-decoder: decoder self-attention, cross-attention to
// the encoder output, bidirectional encoder) and BERT (encoder only).
#include <fmt/format.h>

#include "model/families.hpp"

namespace kvactor::model_detail {

status build_whisper(const build_context& ctx, model_layout& out) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(decoder_layers, read_num_layers(cfg, "decoder_layers"));
  KVACTOR_MODEL_TRY(encoder_layers, read_num_layers(cfg, "encoder_layers"));
  // Whisper has no grouped-query attention: as many KV heads as query heads.
  KVACTOR_MODEL_TRY(decoder, read_attention_shape(ctx, {"decoder_attention_heads", "", "d_model"}));
  KVACTOR_MODEL_TRY(encoder, read_attention_shape(ctx, {"encoder_attention_heads", "", "d_model"}));
  KVACTOR_MODEL_TRY(source_positions, cfg.positive("max_source_positions", int64_max));
  out.layers.reserve(static_cast<size_t>(2 * decoder_layers + encoder_layers));
  for (int64_t i = 0; i < decoder_layers; ++i) {
    // Self- and cross-attention of one decoder layer bind at the same index.
    out.layers.push_back(make_attention(fmt::format("model.decoder.layers.{}.self_attn.attn", i), i,
                                        layer_kind::full, decoder, ctx.kv_dtype));
    out.layers.push_back(make_attention(fmt::format("model.decoder.layers.{}.encoder_attn.attn", i),
                                        i, layer_kind::cross_attention, decoder, ctx.kv_dtype));
  }
  for (int64_t i = 0; i < encoder_layers; ++i)
    out.layers.push_back(make_attention(fmt::format("model.encoder.layers.{}.self_attn.attn", i), i,
                                        layer_kind::encoder_only, encoder, ctx.kv_dtype));
  out.max_encoder_input_tokens = source_positions;
  return fill_totals(ctx, decoder, out, "max_target_positions");
}

status build_bert(const build_context& ctx, model_layout& out) {
  KVACTOR_MODEL_TRY(num_layers, read_num_layers(ctx.cfg));
  KVACTOR_MODEL_TRY(shape, read_attention_shape(ctx));
  out.layers.reserve(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i)
    out.layers.push_back(make_attention(fmt::format("model.encoder.layer.{}.attention.attn", i), i,
                                        layer_kind::encoder_only, shape, ctx.kv_dtype));
  return fill_totals(ctx, shape, out);
}

} // namespace kvactor::model_detail
