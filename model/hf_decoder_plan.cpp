#include "model/hf_decoder_plan.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "kvactor/kernels/float_convert.h"

namespace kvactor {

namespace {

using T = kernels::decoder_tensor;

struct planner {
  const checkpoint& ck;
  const hf_decoder_config& c;
  std::vector<weight_copy> out;

  const tensor_ref* get(const std::string& name) const { return ck.find(name); }
  int64_t width(const tensor_ref* t) const { return t->shape.size() == 2 ? t->shape[1] : 1; }

  // Rows [begin, +n) of `name`, whole rows, at target_offset.
  void rows(T target, int32_t layer, int64_t at, const std::string& name, int64_t begin,
            int64_t n) {
    const auto* t = get(name);
    out.push_back({target, layer, at, t, begin, n, 0, width(t)});
  }
  // Columns [begin, +n) of `name`, every row.
  void columns(T target, int32_t layer, const std::string& name, int64_t begin, int64_t n) {
    const auto* t = get(name);
    out.push_back({target, layer, 0, t, 0, t->shape[0], begin, n});
  }
  void whole(T target, int32_t layer, const std::string& name) {
    const auto* t = get(name);
    out.push_back({target, layer, 0, t, 0, t->shape[0], 0, width(t)});
  }

  void projections(int32_t l, const std::string& p) {
    const auto r = rank_slices_of(c);
    const int64_t hid = c.spec.hidden_size;
    const int64_t qw = static_cast<int64_t>(c.total_q_heads) * c.spec.head_dim;
    const int64_t kw = static_cast<int64_t>(c.total_kv_heads) * c.spec.head_dim;
    const bool fused = c.layout == projection_layout::fused;
    const std::string q = fused ? "self_attn.qkv_proj.weight" : "self_attn.q_proj.weight";
    const std::string k = fused ? q : "self_attn.k_proj.weight";
    const std::string v = fused ? q : "self_attn.v_proj.weight";
    rows(T::qkv, l, 0, p + q, r.q_begin, r.q_rows);
    rows(T::qkv, l, r.q_rows * hid, p + k, (fused ? qw : 0) + r.kv_begin, r.kv_rows);
    rows(T::qkv, l, (r.q_rows + r.kv_rows) * hid, p + v, (fused ? qw + kw : 0) + r.kv_begin,
         r.kv_rows);
    if (c.spec.qkv_bias) {
      rows(T::qkv_bias, l, 0, p + "self_attn.q_proj.bias", r.q_begin, r.q_rows);
      rows(T::qkv_bias, l, r.q_rows, p + "self_attn.k_proj.bias", r.kv_begin, r.kv_rows);
      rows(T::qkv_bias, l, r.q_rows + r.kv_rows, p + "self_attn.v_proj.bias", r.kv_begin,
           r.kv_rows);
    }
    columns(T::o, l, p + "self_attn.o_proj.weight", r.q_begin, r.q_rows);
    const std::string g = fused ? "mlp.gate_up_proj.weight" : "mlp.gate_proj.weight";
    const std::string u = fused ? g : "mlp.up_proj.weight";
    rows(T::gate_up, l, 0, p + g, r.inter_begin, r.inter_rows);
    rows(T::gate_up, l, r.inter_rows * hid, p + u,
         (fused ? c.total_intermediate : 0) + r.inter_begin, r.inter_rows);
    columns(T::down, l, p + "mlp.down_proj.weight", r.inter_begin, r.inter_rows);
  }

  void norms(int32_t l, const std::string& p) {
    whole(T::input_norm, l, p + "input_layernorm.weight");
    whole(T::post_attn_norm, l, p + "post_attention_layernorm.weight");
    if (c.spec.sandwich_norms) {
      whole(T::pre_ffn_norm, l, p + "pre_feedforward_layernorm.weight");
      whole(T::post_ffn_norm, l, p + "post_feedforward_layernorm.weight");
    }
    if (c.spec.qk_norm) {
      whole(T::q_norm, l, p + "self_attn.q_norm.weight");
      whole(T::k_norm, l, p + "self_attn.k_norm.weight");
    }
  }
};

} // namespace

expected<std::vector<weight_copy>> plan_device_weights(const checkpoint& ck,
                                                       const hf_decoder_config& c) {
  if (auto checked = check_checkpoint_tensors(ck, c); !checked) return checked.err();
  planner p{ck, c, {}};
  p.whole(T::embed, -1, "model.embed_tokens.weight");
  for (size_t l = 0; l < c.spec.layers.size(); ++l) {
    const auto prefix = fmt::format("model.layers.{}.", l);
    p.projections(static_cast<int32_t>(l), prefix);
    p.norms(static_cast<int32_t>(l), prefix);
  }
  p.whole(T::final_norm, -1, "model.norm.weight");
  if (!c.tie_embeddings) p.whole(T::lm_head, -1, "lm_head.weight");
  return std::move(p.out);
}

void fill_block(const weight_copy& c, int64_t row_from, int64_t row_count, bool to_bf16,
                std::byte* out) {
  const tensor_ref& t = *c.source;
  const int64_t width = t.shape.size() == 2 ? t.shape[1] : 1;
  const size_t in_size = element_size(t.dtype);
  std::vector<float> row(static_cast<size_t>(c.cols));
  for (int64_t r = 0; r < row_count; ++r) {
    const int64_t first = (c.row_begin + row_from + r) * width + c.col_begin;
    std::byte* const dst = out + static_cast<size_t>(r * c.cols) * (to_bf16 ? 2 : 4);
    if (to_bf16 && t.dtype == tensor_dtype::bf16) { // the common case: bytes as they are
      std::memcpy(dst, t.data + static_cast<size_t>(first) * in_size,
                  static_cast<size_t>(c.cols) * 2);
      continue;
    }
    to_float(t, first, c.cols, to_bf16 ? row.data() : reinterpret_cast<float*>(dst));
    if (!to_bf16) continue;
    for (int64_t i = 0; i < c.cols; ++i) {
      const uint16_t bits = kernels::float_to_bf16(row[static_cast<size_t>(i)]);
      std::memcpy(dst + i * 2, &bits, 2);
    }
  }
}

std::pair<int64_t, int64_t> device_tensor_shape(const hf_decoder_config& c, T t) {
  const auto& s = c.spec;
  const int64_t h = s.hidden_size, d = s.head_dim, inter = s.intermediate_size;
  const int64_t qkv = (s.num_q_heads + 2 * static_cast<int64_t>(s.num_kv_heads)) * d;
  switch (t) {
  case T::embed: return {s.vocab_size, h};
  case T::lm_head:
    return c.tie_embeddings ? std::pair<int64_t, int64_t>{0, 0}
                            : std::pair<int64_t, int64_t>{s.vocab_size, h};
  case T::final_norm:
  case T::input_norm:
  case T::post_attn_norm: return {1, h};
  case T::qkv: return {qkv, h};
  case T::qkv_bias: return s.qkv_bias ? std::pair<int64_t, int64_t>{1, qkv} : std::pair{0L, 0L};
  case T::o: return {h, s.num_q_heads * d};
  case T::gate_up: return {2 * inter, h};
  case T::down: return {h, inter};
  case T::pre_ffn_norm:
  case T::post_ffn_norm: return s.sandwich_norms ? std::pair{1L, h} : std::pair{0L, 0L};
  case T::q_norm:
  case T::k_norm: return s.qk_norm ? std::pair{1L, d} : std::pair{0L, 0L};
  }
  return {0, 0};
}

int64_t decoder_weight_bytes(const hf_decoder_config& c, int32_t matrix_bytes) {
  int64_t weights = 0;
  const size_t layers = c.spec.layers.size();
  for (uint8_t t = 0; t <= static_cast<uint8_t>(T::k_norm); ++t) {
    const auto which = static_cast<T>(t);
    const auto [rows, cols] = device_tensor_shape(c, which);
    const bool global = which == T::embed || which == T::lm_head || which == T::final_norm;
    const int64_t bytes = rows * cols * (rows > 1 ? matrix_bytes : 4);
    weights += global ? bytes : bytes * static_cast<int64_t>(layers);
  }
  return weights;
}

int64_t decoder_gpu_bytes(const hf_decoder_config& c, int32_t max_tokens) {
  const int64_t weights = decoder_weight_bytes(c, 2);
  // The activations of decoder_cuda for max_tokens rows (its make_activations), sampled rows
  // at most 256, the 64 MiB attention and 32 MiB cuBLAS workspaces, and the GPU executor's
  // float hidden states.
  const auto& s = c.spec;
  const int64_t t = max_tokens, h = s.hidden_size, inter = s.intermediate_size;
  const int64_t qw = int64_t{s.num_q_heads} * s.head_dim, kw = int64_t{s.num_kv_heads} * s.head_dim;
  const int64_t rows = std::min<int64_t>(t, 256);
  const int64_t activations = std::max(t, rows) * h * 2 + t * (qw + 2 * kw) * 4 + 2 * t * qw * 2
                              + 2 * t * kw * 2 + t * h * 4 + t * 2 * inter * 4 + t * inter * 2
                              + rows * s.vocab_size * 4 + (int64_t{96} << 20)
                              + t * h * 4; // the executor's hidden states

  return weights + activations;
}

} // namespace kvactor
