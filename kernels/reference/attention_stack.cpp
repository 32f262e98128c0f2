// attention_stack's forward step and greedy sampling.
#include "kvactor/kernels/attention_stack.h"

#include <algorithm>

#include "kvactor/kernels/check.h"
#include "kvactor/kernels/dense_ops.h"
#include "kvactor/kernels/kv_write.h"
#include "kvactor/kernels/synthetic_weights.h"

namespace kvactor::kernels {

namespace {

constexpr float rms_eps = 1e-6f;
constexpr float rope_theta = 10000.0f;

// Activations of one step, sized for the widest layer so that one allocation serves all.
struct step_scratch {
  std::vector<float> xn;   // [T, hidden]
  std::vector<float> q;    // [T, q_heads * head_size]
  std::vector<float> k;    // [T, kv_heads * head_size]
  std::vector<float> v;    // [T, kv_heads * v_size]
  std::vector<float> attn; // [T, q_heads * v_size]
  std::vector<float> o;    // [T, hidden]
};

step_scratch make_scratch(const attention_stack& stack, int32_t num_tokens) {
  size_t q = 0, k = 0, v = 0, attn = 0;
  for (size_t l = 0; l < stack.config().layers.size(); ++l) {
    const layer_geometry& g = stack.geometry(l);
    q = std::max(q, static_cast<size_t>(g.q_heads * g.head_size));
    k = std::max(k, static_cast<size_t>(g.kv_heads * g.head_size));
    v = std::max(v, static_cast<size_t>(g.kv_heads * g.v_size));
    attn = std::max(attn, static_cast<size_t>(g.q_heads * g.v_size));
  }
  const auto t = static_cast<size_t>(num_tokens);
  const auto hidden = static_cast<size_t>(stack.config().hidden_size);
  step_scratch s;
  s.xn.resize(t * hidden);
  s.q.resize(t * q);
  s.k.resize(t * k);
  s.v.resize(t * v);
  s.attn.resize(t * attn);
  s.o.resize(t * hidden);
  return s;
}

// Every check the step's kernels would make, plus the stack's own, before anything is written.
void check_step(const attention_stack& stack, const step_scratch& s, const int32_t* token_ids,
                const int32_t* positions, int32_t num_tokens, const std::vector<kv_view>& kv,
                const std::vector<const layer_batch*>& batch,
                const std::function<void(float*, size_t)>& all_reduce, const float* hidden) {
  const size_t num_layers = stack.config().layers.size();
  KVACTOR_CHECK(num_tokens >= 0, "forward: num_tokens: ", num_tokens, " is negative");
  KVACTOR_CHECK(kv.size() == num_layers, "forward: kv: ", kv.size(), " views for ", num_layers,
                " layers");
  KVACTOR_CHECK(batch.size() == num_layers, "forward: batch: ", batch.size(), " entries for ",
                num_layers, " layers");
  KVACTOR_CHECK(all_reduce || stack.config().tp_size == 1,
                "forward: all_reduce: empty with tp_size ", stack.config().tp_size);
  if (num_tokens > 0) {
    KVACTOR_CHECK(token_ids != nullptr, "forward: token_ids: is null");
    KVACTOR_CHECK(positions != nullptr, "forward: positions: is null");
    KVACTOR_CHECK(hidden != nullptr, "forward: hidden: is null");
  }
  for (size_t l = 0; l < num_layers; ++l) {
    const layer_geometry& g = stack.geometry(l);
    const layer_batch* b = batch[l];
    KVACTOR_CHECK(b != nullptr, "forward: batch[", l, "]: is null");
    KVACTOR_CHECK(b->num_reqs >= 0, "forward: batch[", l, "].num_reqs: ", b->num_reqs,
                  " is negative");
    if (b->num_reqs > 0) {
      KVACTOR_CHECK(b->query_start_loc != nullptr, "forward: batch[", l,
                    "].query_start_loc: is null");
      KVACTOR_CHECK(b->query_start_loc[b->num_reqs] <= num_tokens, "forward: batch[", l,
                    "].query_start_loc[", b->num_reqs, "]: ", b->query_start_loc[b->num_reqs],
                    " exceeds num_tokens ", num_tokens);
    }
    const kv_view& view = kv[static_cast<size_t>(g.kv_source)];
    if (g.kv_source == static_cast<int32_t>(l) && num_tokens > 0)
      check_write_kv(view, s.k.data(), g.head_size, g.mla ? nullptr : s.v.data(),
                     g.mla ? 0 : g.v_size, b->slot_mapping, num_tokens);
    check_paged_attention(stack.layer_attention(l), view, s.q.data(), b->query_start_loc,
                          b->seq_lens, b->block_table, b->width, b->num_reqs, s.attn.data());
    for (int32_t r = 0; r < b->num_reqs; ++r) {
      const int32_t begin = b->query_start_loc[r];
      const int32_t query_len = b->query_start_loc[r + 1] - begin;
      for (int32_t i = 0; i < query_len; ++i) {
        const int32_t expected = b->seq_lens[r] - query_len + i;
        KVACTOR_CHECK(positions[begin + i] == expected, "forward: positions[", begin + i,
                      "]: ", positions[begin + i], " but batch[", l, "] puts it at ", expected);
      }
    }
  }
}

} // namespace

void attention_stack::forward(const int32_t* token_ids, const int32_t* positions,
                              int32_t num_tokens, const std::vector<kv_view>& kv,
                              const std::vector<const layer_batch*>& batch,
                              const std::function<void(float*, size_t)>& all_reduce,
                              float* hidden) const {
  step_scratch s = make_scratch(*this, num_tokens);
  check_step(*this, s, token_ids, positions, num_tokens, kv, batch, all_reduce, hidden);
  if (num_tokens == 0) return;
  const int32_t t_count = num_tokens;
  const int32_t h_size = cfg_.hidden_size;
  const size_t x_len = static_cast<size_t>(t_count) * static_cast<size_t>(h_size);
  for (int32_t t = 0; t < t_count; ++t)
    for (int32_t c = 0; c < h_size; ++c)
      hidden[static_cast<size_t>(t) * static_cast<size_t>(h_size) + static_cast<size_t>(c)] =
          synthetic_uniform(cfg_.seed, weight_matrix::embedding, 0, token_ids[t], c);

  for (size_t l = 0; l < cfg_.layers.size(); ++l) {
    const layer_geometry& g = geo_[l];
    const layer_weights& w = weights_[l];
    const layer_batch& b = *batch[l];
    const kv_view& view = kv[static_cast<size_t>(g.kv_source)];
    rms_norm(hidden, t_count, h_size, rms_eps, s.xn.data());
    linear(s.xn.data(), w.q.data(), t_count, h_size, g.q_heads * g.head_size, s.q.data());
    if (g.rope_dim > 0)
      rope(s.q.data(), positions, t_count, g.q_heads, g.head_size, g.rope_offset, g.rope_dim,
           rope_theta);
    if (g.kv_source == static_cast<int32_t>(l)) {
      linear(s.xn.data(), w.k.data(), t_count, h_size, g.kv_heads * g.head_size, s.k.data());
      if (g.rope_dim > 0)
        rope(s.k.data(), positions, t_count, g.kv_heads, g.head_size, g.rope_offset, g.rope_dim,
             rope_theta);
      if (g.mla) {
        write_kv(view, s.k.data(), g.head_size, nullptr, 0, b.slot_mapping, t_count);
      } else {
        linear(s.xn.data(), w.v.data(), t_count, h_size, g.kv_heads * g.v_size, s.v.data());
        write_kv(view, s.k.data(), g.head_size, s.v.data(), g.v_size, b.slot_mapping, t_count);
      }
    }
    // Padding rows are not written by the attention: zero them so that they stay deterministic.
    std::fill(s.attn.begin(), s.attn.end(), 0.0f);
    paged_attention(layer_attention(l), view, s.q.data(), b.query_start_loc, b.seq_lens,
                    b.block_table, b.width, b.num_reqs, s.attn.data());
    linear(s.attn.data(), w.o.data(), t_count, g.q_heads * g.v_size, h_size, s.o.data());
    if (all_reduce) all_reduce(s.o.data(), x_len);
    for (size_t i = 0; i < x_len; ++i)
      hidden[i] += s.o[i];
  }
}

std::vector<int32_t> attention_stack::sample(const float* hidden,
                                             const std::vector<int32_t>& rows) const {
  KVACTOR_CHECK(rows.empty() || hidden != nullptr, "sample: hidden: is null");
  const int32_t h_size = cfg_.hidden_size;
  std::vector<float> xn(static_cast<size_t>(h_size));
  std::vector<float> logits(static_cast<size_t>(cfg_.vocab_size));
  std::vector<int32_t> tokens;
  tokens.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    KVACTOR_CHECK(rows[i] >= 0, "sample: rows[", i, "]: ", rows[i], " is negative");
    rms_norm(hidden + static_cast<int64_t>(rows[i]) * h_size, 1, h_size, rms_eps, xn.data());
    linear(xn.data(), vocab_.data(), 1, h_size, cfg_.vocab_size, logits.data());
    // max_element returns the first of equal maxima: the lowest index wins ties.
    tokens.push_back(
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  return tokens;
}

} // namespace kvactor::kernels
