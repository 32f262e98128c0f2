// Hybrid stacks of attention and recurrent-state layers: Qwen3-Next (gated delta net linear
// attention) and Jamba (Mamba-1). A state layer keeps fixed-size state per request instead of a
// growing KV cache; its dims are split over the tensor-parallel ranks like heads are.
#include <algorithm>

#include <fmt/format.h>

#include "model/families.hpp"

namespace kvactor::model_detail {

namespace {

/// The recurrent state one layer of a family keeps on one rank.
struct state_layout {
  std::string type;
  std::vector<std::vector<int64_t>> shapes;
};

attention_layer make_state_layer(std::string name, int64_t index, const state_layout& state,
                                 dtype state_dtype) {
  attention_layer l;
  l.name = std::move(name);
  l.index = static_cast<int32_t>(index);
  l.kind = layer_kind::mamba;
  l.kv_dtype = state_dtype;
  l.state_type = state.type;
  l.state_shapes = state.shapes;
  l.state_dtypes.assign(state.shapes.size(), state_dtype);
  return l;
}

/// A causal conv1d of kernel k keeps the last k - 1 inputs.
expected<int64_t> read_conv_kernel(const config_reader& cfg, std::string_view key) {
  KVACTOR_MODEL_TRY(kernel, cfg.positive(key));
  if (kernel < 2) return cfg.invalid(key, fmt::format("{} must be at least 2", kernel));
  return kernel;
}

/// Qwen3-Next: full attention every full_attention_interval-th layer, or as layer_types says.
expected<std::vector<bool>> qwen3_next_full_layers(const config_reader& cfg, int64_t num_layers) {
  std::vector<bool> full;
  full.reserve(static_cast<size_t>(num_layers));
  if (cfg.has("layer_types")) {
    KVACTOR_MODEL_TRY(types, cfg.strings("layer_types"));
    if (static_cast<int64_t>(types.size()) != num_layers)
      return cfg.invalid("layer_types", fmt::format("has {} entries but there are {} layers",
                                                    types.size(), num_layers));
    for (size_t i = 0; i < types.size(); ++i) {
      const auto& t = types[i];
      if (t != "full_attention" && t != "linear_attention")
        return cfg.invalid(fmt::format("layer_types[{}]", i),
                           fmt::format("unknown value '{}' (expected full_attention or "
                                       "linear_attention)",
                                       t));
      full.push_back(t == "full_attention");
    }
    return full;
  }
  KVACTOR_MODEL_TRY(interval, cfg.positive("full_attention_interval"));
  for (int64_t i = 0; i < num_layers; ++i)
    full.push_back((i + 1) % interval == 0);
  return full;
}

/// Gated delta net state of one rank:
///   conv     [conv_dim / tp, linear_conv_kernel_dim - 1]
///            conv_dim = 2 x key heads x key head dim + value heads x value head dim
///   temporal [value heads / tp, key head dim, value head dim]
expected<state_layout> read_gated_delta_net(const build_context& ctx) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(key_heads, cfg.positive("linear_num_key_heads"));
  KVACTOR_MODEL_TRY(key_dim, cfg.positive("linear_key_head_dim"));
  KVACTOR_MODEL_TRY(value_heads, cfg.positive("linear_num_value_heads"));
  KVACTOR_MODEL_TRY(value_dim, cfg.positive("linear_value_head_dim"));
  KVACTOR_MODEL_TRY(kernel, read_conv_kernel(cfg, "linear_conv_kernel_dim"));
  KVACTOR_MODEL_TRY(key_heads_rank, split_evenly("linear_num_key_heads", key_heads, ctx.tp));
  KVACTOR_MODEL_TRY(value_heads_rank, split_evenly("linear_num_value_heads", value_heads, ctx.tp));
  // Each factor is <= int32 max, so these products fit; their sum is checked below.
  auto qk_dim = 2 * key_heads_rank * key_dim;
  auto v_dim = value_heads_rank * value_dim;
  if (qk_dim > int64_max - v_dim)
    return cfg.invalid("linear_num_key_heads", "conv_dim overflows a 64-bit integer");
  state_layout out;
  out.type = "gated_delta_net";
  out.shapes = {{qk_dim + v_dim, kernel - 1}, {value_heads_rank, key_dim, value_dim}};
  return out;
}

/// Mamba-1 state of one rank, intermediate = mamba_expand x hidden_size:
///   conv [intermediate / tp, mamba_d_conv - 1]
///   ssm  [intermediate / tp, mamba_d_state]
expected<state_layout> read_mamba1(const build_context& ctx) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(expand, cfg.positive("mamba_expand"));
  KVACTOR_MODEL_TRY(hidden, cfg.positive("hidden_size"));
  KVACTOR_MODEL_TRY(kernel, read_conv_kernel(cfg, "mamba_d_conv"));
  KVACTOR_MODEL_TRY(d_state, cfg.positive("mamba_d_state"));
  KVACTOR_MODEL_TRY(intermediate, checked_mul("mamba_expand x hidden_size", expand, hidden));
  KVACTOR_MODEL_TRY(intermediate_rank,
                    split_evenly("mamba_expand x hidden_size", intermediate, ctx.tp));
  state_layout out;
  out.type = "mamba1";
  out.shapes = {{intermediate_rank, kernel - 1}, {intermediate_rank, d_state}};
  return out;
}

} // namespace

status build_qwen3_next(const build_context& ctx, model_layout& out) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(num_layers, read_num_layers(cfg));
  KVACTOR_MODEL_TRY(shape, read_attention_shape(ctx));
  KVACTOR_MODEL_TRY(full, qwen3_next_full_layers(cfg, num_layers));
  state_layout state;
  if (std::find(full.begin(), full.end(), false) != full.end()) {
    KVACTOR_MODEL_TRY(s, read_gated_delta_net(ctx));
    state = std::move(s);
  }
  out.layers.reserve(full.size());
  for (int64_t i = 0; i < num_layers; ++i) {
    if (full[static_cast<size_t>(i)])
      out.layers.push_back(
          make_attention(decoder_attn_name(i), i, layer_kind::full, shape, ctx.kv_dtype));
    else
      out.layers.push_back(make_state_layer(fmt::format("model.layers.{}.linear_attn", i), i, state,
                                            ctx.model_dtype));
  }
  return fill_totals(ctx, shape, out);
}

status build_jamba(const build_context& ctx, model_layout& out) {
  const auto& cfg = ctx.cfg;
  KVACTOR_MODEL_TRY(num_layers, read_num_layers(cfg));
  KVACTOR_MODEL_TRY(shape, read_attention_shape(ctx));
  KVACTOR_MODEL_TRY(period, cfg.positive("attn_layer_period"));
  KVACTOR_MODEL_TRY(offset, cfg.non_negative("attn_layer_offset"));
  if (offset >= period)
    return cfg.invalid("attn_layer_offset",
                       fmt::format("{} must be below attn_layer_period {}", offset, period));
  std::vector<bool> attention;
  for (int64_t i = 0; i < num_layers; ++i)
    attention.push_back(i % period == offset);
  state_layout state;
  if (std::find(attention.begin(), attention.end(), false) != attention.end()) {
    KVACTOR_MODEL_TRY(s, read_mamba1(ctx));
    state = std::move(s);
  }
  out.layers.reserve(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) {
    if (attention[static_cast<size_t>(i)])
      out.layers.push_back(
          make_attention(decoder_attn_name(i), i, layer_kind::full, shape, ctx.kv_dtype));
    else
      out.layers.push_back(
          make_state_layer(fmt::format("model.layers.{}.mamba", i), i, state, ctx.model_dtype));
  }
  return fill_totals(ctx, shape, out);
}

} // namespace kvactor::model_detail
