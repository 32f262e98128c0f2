// Test support shared by the CPU and GPU decoder runners: one step's metadata for a list of
// (sequence, token) pairs, laid out the way the rank lays out a batch. Sequence s owns kernel
// blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq); lens holds each sequence's length and
// grows by the step's tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "kvactor/kernels/kv_cache_view.h"

namespace kvactor::test {

/// A paged cache of `blocks` blocks laid out [block][head][token][K then V].
inline kernels::kv_view paged_kv_view(void* base, kernels::element_type type, int64_t blocks,
                                      int32_t heads, int32_t block_size, int64_t content) {
  kernels::kv_view v;
  v.base = base;
  v.type = type;
  v.num_blocks = blocks;
  v.num_heads = heads;
  v.block_size = block_size;
  v.content = static_cast<int32_t>(content);
  v.stride_token = content;
  v.stride_head = block_size * content;
  v.stride_block = heads * block_size * content;
  return v;
}

struct runner_step {
  std::vector<int32_t> order, qsl{0}, seq_lens, positions, table, last_rows;
  std::vector<int64_t> slots;
};

/// Appends seqs[i]'s next token for every i (several of one sequence in a row: a prefill chunk).
inline runner_step lay_out_step(const std::vector<int32_t>& seqs, std::vector<int32_t>& lens,
                                int32_t blocks_per_seq, int32_t block_size) {
  runner_step st;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t s = seqs[i];
    if (st.order.empty() || st.order.back() != s) {
      if (!st.order.empty()) st.qsl.push_back(static_cast<int32_t>(i));
      st.order.push_back(s);
      for (int32_t b = 0; b < blocks_per_seq; ++b)
        st.table.push_back(s * blocks_per_seq + b);
    }
    const int32_t pos = lens[static_cast<size_t>(s)]++;
    st.positions.push_back(pos);
    st.slots.push_back(static_cast<int64_t>(s) * blocks_per_seq * block_size + pos);
  }
  st.qsl.push_back(static_cast<int32_t>(seqs.size()));
  for (size_t r = 0; r < st.order.size(); ++r) {
    st.seq_lens.push_back(lens[static_cast<size_t>(st.order[r])]);
    st.last_rows.push_back(st.qsl[r + 1] - 1);
  }
  return st;
}

} // namespace kvactor::test
