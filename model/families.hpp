// Internal to the model loader: one builder per model family, and the pieces they share.
// A builder fills the family-specific parts of a model_layout (totals, positions, modules,
// layers); the loader fills model_type, rank, tensor_parallel_size and model_dtype.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "messages/layer.hpp"
#include "model/config_reader.hpp"

namespace kvactor::model_detail {

struct build_context {
  const config_reader& cfg; // the section the family reads (text_config where it applies)
  int32_t tp = 1;
  int32_t rank = 0;
  dtype model_dtype = dtype::bfloat16;
  dtype kv_dtype = dtype::bfloat16;
};

using family_builder = status (*)(const build_context&, model_layout&);

/// Heads of one attention stack, totals from the config and the share of one rank.
struct attention_shape {
  int64_t num_heads_total = 0;
  int64_t num_kv_heads_total = 0;
  int32_t num_heads = 0;    // per rank
  int32_t num_kv_heads = 0; // per rank
  int32_t head_size = 0;
};

/// Field names an attention stack is read from; `kv_heads` empty = as many as query heads.
struct attention_fields {
  std::string_view heads = "num_attention_heads";
  std::string_view kv_heads = "num_key_value_heads";
  std::string_view hidden = "hidden_size";
};

/// Reads heads (KV heads default to query heads), head size (`head_dim`, else hidden / heads)
/// and splits the heads over ctx.tp.
expected<attention_shape> read_attention_shape(const build_context& ctx,
                                               const attention_fields& fields = {});

/// `layer_types` as per-layer "is sliding" flags. REQUIRES: cfg.has("layer_types").
/// Fails when its length differs from `num_layers` or an entry is not
/// sliding_attention / full_attention.
expected<std::vector<bool>> read_sliding_layer_types(const config_reader& cfg, int64_t num_layers);

/// `layer_types` when the config has it, else sliding and full alternating with layer 0 sliding
/// (Gemma 2's model definition and transformers' GptOssConfig default).
expected<std::vector<bool>> sliding_types_or_alternating(const config_reader& cfg,
                                                         int64_t num_layers);

/// `sliding_window` when any flag is set (missing_field if the config has none), else 0.
expected<int32_t> read_window_if_needed(const config_reader& cfg, const std::vector<bool>& sliding);

/// The number of decoder layers (`num_hidden_layers`), bounded by max_layers.
expected<int64_t> read_num_layers(const config_reader& cfg,
                                  std::string_view key = "num_hidden_layers");

/// "model.layers.{i}.self_attn.attn"
std::string decoder_attn_name(int64_t i);

/// An attention layer with heads and dtype filled in; the caller sets window/chunk/flags.
attention_layer make_attention(std::string name, int64_t index, layer_kind kind,
                               const attention_shape& shape, dtype kv_dtype);

/// Decoder layers of full or sliding-window attention, one per flag.
std::vector<attention_layer> make_decoder_stack(const std::vector<bool>& sliding, int32_t window,
                                                const attention_shape& shape, dtype kv_dtype);

/// Which layers slide, given the config and the layer count.
using sliding_rule = expected<std::vector<bool>> (*)(const config_reader&, int64_t);

/// The recipe every full / sliding-window decoder family shares: layer count, heads, the
/// per-layer sliding flags from `rule`, the window, the stack and the totals.
status build_sliding_stack(const build_context& ctx, model_layout& out, sliding_rule rule);

/// Fills the model-wide head totals of `out` from `shape` and its max_position_embeddings from
/// the field `positions_key` (required).
status fill_totals(const build_context& ctx, const attention_shape& shape, model_layout& out,
                   std::string_view positions_key = "max_position_embeddings");

// Families (families_dense.cpp, families_gemma.cpp, families_mla.cpp, families_hybrid.cpp,
// families_encoder.cpp).
status build_llama_like(const build_context& ctx, model_layout& out); // llama mistral qwen2/3 phi3
status build_gpt_oss(const build_context& ctx, model_layout& out);
status build_llama4(const build_context& ctx, model_layout& out);
status build_gemma2(const build_context& ctx, model_layout& out);
status build_gemma3(const build_context& ctx, model_layout& out);
status build_gemma3n(const build_context& ctx, model_layout& out);
status build_deepseek(const build_context& ctx, model_layout& out); // deepseek_v2, deepseek_v3
status build_longcat_flash(const build_context& ctx, model_layout& out);
status build_qwen3_next(const build_context& ctx, model_layout& out);
status build_jamba(const build_context& ctx, model_layout& out);
status build_whisper(const build_context& ctx, model_layout& out);
status build_bert(const build_context& ctx, model_layout& out);

} // namespace kvactor::model_detail
