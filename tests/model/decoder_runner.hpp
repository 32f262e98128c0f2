// Test support: sequences through the CPU decoder with a paged float KV cache of their own, the
// way a rank runs them (prefill chunks and decode steps share one forward per step).
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "kvactor/kernels/decoder.h"
#include "runner_step.hpp"

namespace kvactor::test {

class decoder_runner {
public:
  static constexpr int32_t block_size = 16;

  /// Room for `max_tokens` tokens in each of `max_seqs` sequences, cached as `cache_type` (f32,
  /// or bf16 as a rank's cache, or fp8_e4m3 with scales of 1).
  decoder_runner(const kernels::decoder& d, int32_t max_seqs, int32_t max_tokens,
                 kernels::element_type cache_type = kernels::element_type::f32)
      : d_(d), blocks_per_seq_((max_tokens + block_size - 1) / block_size),
        lens_(static_cast<size_t>(max_seqs), 0) {
    const auto& s = d.spec();
    const int64_t content = 2 * s.head_dim;
    const int64_t blocks = static_cast<int64_t>(blocks_per_seq_) * max_seqs;
    for (size_t l = 0; l < s.layers.size(); ++l) {
      // float storage, of which a 16-bit cache uses the first half
      caches_.emplace_back(static_cast<size_t>(blocks * s.num_kv_heads * block_size * content));
      views_.push_back(paged_kv_view(caches_.back().data(), cache_type, blocks, s.num_kv_heads,
                                     block_size, content));
    }
  }

  /// Appends tokens[i] to sequence seqs[i] (several tokens of one sequence in a row are a
  /// prefill chunk); returns the logits of each sequence's last new token, in `seqs` order of
  /// first appearance: [distinct seqs, vocab].
  std::vector<float> step(const std::vector<int32_t>& seqs, const std::vector<int32_t>& tokens,
                          const std::function<void(float*, size_t)>& all_reduce = {}) {
    auto st = lay_out_step(seqs, lens_, blocks_per_seq_, block_size);
    kernels::layer_batch b;
    b.query_start_loc = st.qsl.data();
    b.seq_lens = st.seq_lens.data();
    b.block_table = st.table.data();
    b.width = blocks_per_seq_;
    b.num_reqs = static_cast<int32_t>(st.order.size());
    b.slot_mapping = st.slots.data();
    const std::vector<const kernels::layer_batch*> batch(views_.size(), &b);
    std::vector<float> hidden(tokens.size() * static_cast<size_t>(d_.spec().hidden_size));
    d_.forward(tokens.data(), st.positions.data(), static_cast<int32_t>(tokens.size()), views_,
               batch, all_reduce, hidden.data());
    return d_.logits(hidden.data(), st.last_rows);
  }

  /// One sequence's prompt, then `n` greedy tokens (argmax, the lowest id on ties).
  std::vector<int32_t> greedy(int32_t seq, const std::vector<int32_t>& prompt, int32_t n,
                              std::vector<float>* prompt_logits = nullptr,
                              const std::function<void(float*, size_t)>& all_reduce = {}) {
    auto logits = step(std::vector<int32_t>(prompt.size(), seq), prompt, all_reduce);
    if (prompt_logits) *prompt_logits = logits;
    std::vector<int32_t> out;
    for (int32_t i = 0; i < n; ++i) {
      out.push_back(
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      if (i + 1 < n) logits = step({seq}, {out.back()}, all_reduce);
    }
    return out;
  }

private:
  const kernels::decoder& d_;
  int32_t blocks_per_seq_;
  std::vector<int32_t> lens_;
  std::vector<std::vector<float>> caches_;
  std::vector<kernels::kv_view> views_;
};

} // namespace kvactor::test
