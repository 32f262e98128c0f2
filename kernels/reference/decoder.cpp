#include "kvactor/kernels/decoder.h"

#include <cmath>
#include <numbers>
#include <string>

#include "kvactor/kernels/check.h"
#include "kvactor/kernels/dense_ops.h"
#include "kvactor/kernels/kv_write.h"
#include "kvactor/kernels/paged_attention.h"

namespace kvactor::kernels {

namespace {

void check_size(const std::vector<float>& w, size_t expected, size_t layer, const char* name,
                bool optional) {
  if (optional && w.empty()) return;
  KVACTOR_CHECK(w.size() == expected, "decoder: layer ", layer, " ", name, ": ", w.size(),
                " values, expected ", expected);
}

void add_bias(float* y, const std::vector<float>& bias, int32_t n, int32_t width) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < n; ++t)
    for (int32_t i = 0; i < width; ++i)
      y[t * width + i] += bias[static_cast<size_t>(i)];
}

float activate(float x, mlp_activation a) {
  if (a == mlp_activation::silu) return x / (1.0f + std::exp(-x));
  // GELU, tanh approximation (transformers' gelu_pytorch_tanh)
  const float c = std::sqrt(2.0f / std::numbers::pi_v<float>);
  return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

void soft_cap(float* x, size_t n, float cap) {
  if (cap <= 0.0f) return;
  for (size_t i = 0; i < n; ++i)
    x[i] = cap * std::tanh(x[i] / cap);
}

} // namespace

const char* to_string(decoder_tensor t) {
  switch (t) {
  case decoder_tensor::embed: return "embed";
  case decoder_tensor::lm_head: return "lm_head";
  case decoder_tensor::final_norm: return "final_norm";
  case decoder_tensor::qkv: return "qkv";
  case decoder_tensor::qkv_bias: return "qkv_bias";
  case decoder_tensor::o: return "o";
  case decoder_tensor::gate_up: return "gate_up";
  case decoder_tensor::down: return "down";
  case decoder_tensor::input_norm: return "input_norm";
  case decoder_tensor::post_attn_norm: return "post_attn_norm";
  case decoder_tensor::pre_ffn_norm: return "pre_ffn_norm";
  case decoder_tensor::post_ffn_norm: return "post_ffn_norm";
  case decoder_tensor::q_norm: return "q_norm";
  case decoder_tensor::k_norm: return "k_norm";
  }
  return "?";
}

std::vector<double> rope_inverse_frequencies(const rope_spec& rope, int32_t rot_dim) {
  KVACTOR_CHECK(rot_dim > 0 && rot_dim % 2 == 0, "rope: rot_dim: ", rot_dim,
                " must be even and > 0");
  KVACTOR_CHECK(rope.theta > 0, "rope: theta: ", rope.theta, " must be > 0");
  std::vector<double> inv(static_cast<size_t>(rot_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = std::pow(rope.theta, -2.0 * static_cast<double>(i) / rot_dim);
  for (auto& f : inv)
    f /= rope.linear_factor;
  if (!rope.llama3) return inv;
  // Llama 3: long wavelengths slowed by `factor`, short ones kept, the band between blended.
  const double old_len = rope.original_max_position_embeddings;
  const double low_wavelen = old_len / rope.low_freq_factor;
  const double high_wavelen = old_len / rope.high_freq_factor;
  for (auto& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f /= rope.factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_len / wavelen - rope.low_freq_factor)
                            / (rope.high_freq_factor - rope.low_freq_factor);
      f = (1.0 - smooth) * f / rope.factor + smooth * f;
    }
  }
  return inv;
}

struct decoder::scratch {
  std::vector<float> x, h, q, k, v, a, o, gate, up;
};

decoder::decoder(decoder_spec spec, decoder_weights weights)
    : spec_(std::move(spec)), w_(std::move(weights)) {
  const auto& s = spec_;
  KVACTOR_CHECK(s.vocab_size > 0 && s.hidden_size > 0 && s.intermediate_size > 0
                    && s.num_q_heads > 0 && s.num_kv_heads > 0 && s.head_dim > 0
                    && s.num_q_heads % s.num_kv_heads == 0,
                "decoder: sizes: vocab ", s.vocab_size, ", hidden ", s.hidden_size,
                ", intermediate ", s.intermediate_size, ", heads ", s.num_q_heads, "/",
                s.num_kv_heads, ", head_dim ", s.head_dim);
  KVACTOR_CHECK(w_.layers.size() == s.layers.size(), "decoder: ", w_.layers.size(),
                " layers of weights for ", s.layers.size(), " layers");
  const size_t hid = static_cast<size_t>(s.hidden_size), d = static_cast<size_t>(s.head_dim);
  const size_t qw = static_cast<size_t>(s.num_q_heads) * d;
  const size_t kw = static_cast<size_t>(s.num_kv_heads) * d;
  const size_t inter = static_cast<size_t>(s.intermediate_size);
  check_size(w_.embed, static_cast<size_t>(s.vocab_size) * hid, 0, "embed", false);
  check_size(w_.lm_head, static_cast<size_t>(s.vocab_size) * hid, 0, "lm_head", true);
  check_size(w_.final_norm, hid, 0, "final_norm", false);
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    const auto& L = w_.layers[l];
    check_size(L.q, qw * hid, l, "q", false);
    check_size(L.k, kw * hid, l, "k", false);
    check_size(L.v, kw * hid, l, "v", false);
    check_size(L.o, hid * qw, l, "o", false);
    check_size(L.q_bias, qw, l, "q_bias", !s.qkv_bias);
    check_size(L.k_bias, kw, l, "k_bias", !s.qkv_bias);
    check_size(L.v_bias, kw, l, "v_bias", !s.qkv_bias);
    check_size(L.q_norm, d, l, "q_norm", !s.qk_norm);
    check_size(L.k_norm, d, l, "k_norm", !s.qk_norm);
    check_size(L.input_norm, hid, l, "input_norm", false);
    check_size(L.post_attn_norm, hid, l, "post_attn_norm", false);
    check_size(L.pre_ffn_norm, hid, l, "pre_ffn_norm", !s.sandwich_norms);
    check_size(L.post_ffn_norm, hid, l, "post_ffn_norm", !s.sandwich_norms);
    check_size(L.gate, inter * hid, l, "gate", false);
    check_size(L.up, inter * hid, l, "up", false);
    check_size(L.down, hid * inter, l, "down", false);
    const auto rot = static_cast<int32_t>(s.head_dim * s.layers[l].rope.partial_rotary_factor);
    inv_freq_.push_back(rope_inverse_frequencies(s.layers[l].rope, rot - rot % 2));
  }
}

void decoder::forward(const int32_t* token_ids, const int32_t* positions, int32_t n,
                      const std::vector<kv_view>& kv, const std::vector<const layer_batch*>& batch,
                      const std::function<void(float*, size_t)>& all_reduce, float* hidden) const {
  const auto& s = spec_;
  const size_t hid = static_cast<size_t>(s.hidden_size);
  KVACTOR_CHECK(kv.size() == s.layers.size() && batch.size() == s.layers.size(),
                "decoder: forward: ", kv.size(), " cache views and ", batch.size(), " batches for ",
                s.layers.size(), " layers");
  for (int64_t t = 0; t < n; ++t) {
    KVACTOR_CHECK(token_ids[t] >= 0 && token_ids[t] < s.vocab_size, "decoder: token_ids[", t,
                  "]: ", token_ids[t], " is outside the vocabulary of ", s.vocab_size);
    for (size_t i = 0; i < hid; ++i)
      hidden[t * hid + i] =
          w_.embed[static_cast<size_t>(token_ids[t]) * hid + i] * s.embedding_scale;
  }
  scratch sc;
  sc.h.resize(static_cast<size_t>(n) * hid);
  auto reduce = [&](std::vector<float>& part) {
    if (all_reduce) all_reduce(part.data(), part.size());
  };
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const auto& L = w_.layers[l];
    weighted_rms_norm(hidden, n, s.hidden_size, s.rms_eps, L.input_norm.data(),
                      s.norm_one_plus_weight, sc.h.data());
    attention_block(l, positions, n, kv[l], *batch[l], sc);
    reduce(sc.o);
    if (s.sandwich_norms)
      weighted_rms_norm(sc.o.data(), n, s.hidden_size, s.rms_eps, L.post_attn_norm.data(),
                        s.norm_one_plus_weight, sc.o.data());
    for (size_t i = 0; i < sc.o.size(); ++i)
      hidden[i] += sc.o[i];
    const auto& pre_mlp = s.sandwich_norms ? L.pre_ffn_norm : L.post_attn_norm;
    weighted_rms_norm(hidden, n, s.hidden_size, s.rms_eps, pre_mlp.data(), s.norm_one_plus_weight,
                      sc.h.data());
    mlp_block(l, n, sc);
    reduce(sc.o);
    if (s.sandwich_norms)
      weighted_rms_norm(sc.o.data(), n, s.hidden_size, s.rms_eps, L.post_ffn_norm.data(),
                        s.norm_one_plus_weight, sc.o.data());
    for (size_t i = 0; i < sc.o.size(); ++i)
      hidden[i] += sc.o[i];
  }
}

// sc.h holds the normed input; leaves this rank's partial output projection in sc.o.
void decoder::attention_block(size_t l, const int32_t* positions, int32_t n, const kv_view& kv,
                              const layer_batch& b, scratch& sc) const {
  const auto& s = spec_;
  const auto& L = w_.layers[l];
  const int32_t d = s.head_dim, qw = s.num_q_heads * d, kw = s.num_kv_heads * d;
  sc.q.resize(static_cast<size_t>(n) * qw);
  sc.k.resize(static_cast<size_t>(n) * kw);
  sc.v.resize(static_cast<size_t>(n) * kw);
  projection(sc.h.data(), L.q.data(), n, s.hidden_size, qw, sc.q.data());
  projection(sc.h.data(), L.k.data(), n, s.hidden_size, kw, sc.k.data());
  projection(sc.h.data(), L.v.data(), n, s.hidden_size, kw, sc.v.data());
  add_bias(sc.q.data(), L.q_bias, n, qw);
  add_bias(sc.k.data(), L.k_bias, n, kw);
  add_bias(sc.v.data(), L.v_bias, n, kw);
  if (s.qk_norm) {
    weighted_rms_norm(sc.q.data(), n * s.num_q_heads, d, s.rms_eps, L.q_norm.data(),
                      s.norm_one_plus_weight, sc.q.data());
    weighted_rms_norm(sc.k.data(), n * s.num_kv_heads, d, s.rms_eps, L.k_norm.data(),
                      s.norm_one_plus_weight, sc.k.data());
  }
  const auto& inv = inv_freq_[l];
  const auto rot = static_cast<int32_t>(inv.size() * 2);
  rope_with_frequencies(sc.q.data(), positions, n, s.num_q_heads, d, 0, rot, inv.data());
  rope_with_frequencies(sc.k.data(), positions, n, s.num_kv_heads, d, 0, rot, inv.data());
  write_kv(kv, sc.k.data(), d, sc.v.data(), d, b.slot_mapping, n);
  attention_params p;
  p.num_q_heads = s.num_q_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.head_size = d;
  p.v_offset = d;
  p.v_size = d;
  p.scale = s.attn_scale > 0.0f ? s.attn_scale : 1.0f / std::sqrt(static_cast<float>(d));
  p.sliding_window = s.layers[l].sliding_window;
  p.softcap = s.attn_softcap;
  sc.a.assign(static_cast<size_t>(n) * qw, 0.0f);
  paged_attention(p, kv, sc.q.data(), b.query_start_loc, b.seq_lens, b.block_table, b.width,
                  b.num_reqs, sc.a.data());
  sc.o.resize(static_cast<size_t>(n) * s.hidden_size);
  projection(sc.a.data(), L.o.data(), n, qw, s.hidden_size, sc.o.data());
}

// sc.h holds the normed input; leaves this rank's partial down projection in sc.o.
void decoder::mlp_block(size_t l, int32_t n, scratch& sc) const {
  const auto& s = spec_;
  const auto& L = w_.layers[l];
  const size_t inter = static_cast<size_t>(s.intermediate_size);
  sc.gate.resize(static_cast<size_t>(n) * inter);
  sc.up.resize(static_cast<size_t>(n) * inter);
  projection(sc.h.data(), L.gate.data(), n, s.hidden_size, s.intermediate_size, sc.gate.data());
  projection(sc.h.data(), L.up.data(), n, s.hidden_size, s.intermediate_size, sc.up.data());
  for (size_t i = 0; i < sc.gate.size(); ++i)
    sc.gate[i] = activate(sc.gate[i], s.activation) * sc.up[i];
  sc.o.resize(static_cast<size_t>(n) * s.hidden_size);
  projection(sc.gate.data(), L.down.data(), n, s.intermediate_size, s.hidden_size, sc.o.data());
}

std::vector<float> decoder::logits(const float* hidden, const std::vector<int32_t>& rows) const {
  const auto& s = spec_;
  const size_t hid = static_cast<size_t>(s.hidden_size);
  std::vector<float> normed(rows.size() * hid);
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy_n(hidden + static_cast<size_t>(rows[r]) * hid, hid, normed.data() + r * hid);
  weighted_rms_norm(normed.data(), static_cast<int32_t>(rows.size()), s.hidden_size, s.rms_eps,
                    w_.final_norm.data(), s.norm_one_plus_weight, normed.data());
  std::vector<float> out(rows.size() * static_cast<size_t>(s.vocab_size));
  const auto& head = w_.lm_head.empty() ? w_.embed : w_.lm_head;
  projection(normed.data(), head.data(), static_cast<int32_t>(rows.size()), s.hidden_size,
             s.vocab_size, out.data());
  soft_cap(out.data(), out.size(), s.final_softcap);
  return out;
}

} // namespace kvactor::kernels
