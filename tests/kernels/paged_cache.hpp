// Test support: a host KV cache buffer with a chosen layout, a deterministic block pool, and a
// step builder that turns "these sequences get n new tokens" into paged-attention metadata.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kvactor/kernels/kv_cache_view.h"
#include "kvactor/kernels/layer_batch.h"

namespace kvactor::kernels::test {

enum class cache_layout { bhnc, bnhc };

/// The view of a densely packed cache of this shape (base null): [block, head, token, entry]
/// (bhnc) or [block, token, head, entry] (bnhc), each entry `content` elements plus `pad` never
/// written.
inline kv_view packed_view(element_type type, int64_t num_blocks, int32_t num_heads,
                           int32_t block_size, int32_t content,
                           cache_layout layout = cache_layout::bhnc, int32_t pad = 0) {
  kv_view v;
  v.type = type;
  v.num_blocks = num_blocks;
  v.num_heads = num_heads;
  v.block_size = block_size;
  v.content = content;
  const int64_t entry = content + pad;
  if (layout == cache_layout::bhnc) {
    v.stride_token = entry;
    v.stride_head = entry * block_size;
    v.stride_block = v.stride_head * num_heads;
  } else {
    v.stride_head = entry;
    v.stride_token = entry * num_heads;
    v.stride_block = v.stride_token * block_size;
  }
  return v;
}

/// One layer's cache. Filled with 0xff bytes (NaN in every element type), so that reading an
/// entry that was never written poisons the result.
class cache_buffer {
public:
  cache_buffer(element_type type, int64_t num_blocks, int32_t num_heads, int32_t block_size,
               int32_t content, cache_layout layout = cache_layout::bhnc, int32_t pad = 0)
      : view_(packed_view(type, num_blocks, num_heads, block_size, content, layout, pad)) {
    const auto bytes = static_cast<size_t>(view_.stride_block * num_blocks) * element_size(type);
    storage_.resize((bytes + 3) / 4);
    std::memset(storage_.data(), 0xff, storage_.size() * sizeof(float));
    view_.base = storage_.data();
  }
  cache_buffer(const cache_buffer&) = delete;
  cache_buffer& operator=(const cache_buffer&) = delete;

  const kv_view& view() const { return view_; }
  /// The per-tensor scales of an FP8 cache.
  void set_scales(float k_scale, float v_scale) {
    view_.k_scale = k_scale;
    view_.v_scale = v_scale;
  }
  bool same_bytes(const cache_buffer& other) const {
    return storage_.size() == other.storage_.size()
           && std::memcmp(storage_.data(), other.storage_.data(), storage_.size() * 4) == 0;
  }
  std::vector<float> snapshot() const { return storage_; }

private:
  std::vector<float> storage_; // float-typed for alignment; holds any element type
  kv_view view_;
};

/// Block ids handed out in a shuffled but fixed order, so block tables are scattered.
class block_pool {
public:
  block_pool(int64_t num_blocks, uint32_t seed) {
    for (int64_t i = 0; i < num_blocks; ++i)
      free_.push_back(static_cast<int32_t>(i));
    std::mt19937 rng(seed);
    for (size_t i = free_.size(); i > 1; --i)
      std::swap(free_[i - 1], free_[rng() % i]);
  }
  int32_t take() {
    int32_t id = free_.back();
    free_.pop_back();
    return id;
  }

private:
  std::vector<int32_t> free_;
};

/// A request: all its tokens known so far, how many are in the cache, and its blocks.
struct sequence {
  std::vector<int32_t> tokens;
  int32_t computed = 0;
  std::vector<int32_t> blocks;
};

/// One step's metadata, shared by every layer (one KV cache group).
struct step_batch {
  std::vector<int32_t> token_ids, positions; // [T]
  std::vector<int32_t> query_start_loc;      // [R + 1]
  std::vector<int32_t> seq_lens;             // [R]
  std::vector<int32_t> block_table;          // [R, width]
  int32_t width = 1;
  std::vector<int64_t> slot_mapping; // [T]

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_reqs() const { return static_cast<int32_t>(seq_lens.size()); }
  layer_batch layer() const {
    return {query_start_loc.data(), seq_lens.data(), block_table.data(), width, num_reqs(),
            slot_mapping.data()};
  }
  /// Requests [begin, end) as a batch of their own (a microbatch).
  step_batch slice(int32_t begin, int32_t end) const {
    step_batch s;
    const int32_t t0 = query_start_loc[static_cast<size_t>(begin)];
    const int32_t t1 = query_start_loc[static_cast<size_t>(end)];
    s.token_ids.assign(token_ids.begin() + t0, token_ids.begin() + t1);
    s.positions.assign(positions.begin() + t0, positions.begin() + t1);
    s.slot_mapping.assign(slot_mapping.begin() + t0, slot_mapping.begin() + t1);
    for (int32_t r = begin; r <= end; ++r)
      s.query_start_loc.push_back(query_start_loc[static_cast<size_t>(r)] - t0);
    s.seq_lens.assign(seq_lens.begin() + begin, seq_lens.begin() + end);
    s.width = width;
    s.block_table.assign(block_table.begin() + int64_t{begin} * width,
                         block_table.begin() + int64_t{end} * width);
    return s;
  }
};

/// Schedules counts[i] new tokens of *seqs[i] (taking blocks from `pool` as needed, advancing
/// `computed`), then `padding` padding tokens (token 0, position 0, slot -1).
inline step_batch schedule(const std::vector<sequence*>& seqs, const std::vector<int32_t>& counts,
                           block_pool& pool, int32_t block_size, int32_t padding = 0) {
  step_batch b;
  b.query_start_loc.push_back(0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    sequence& s = *seqs[i];
    for (int32_t n = 0; n < counts[i]; ++n) {
      const int32_t pos = s.computed++;
      if (pos / block_size >= static_cast<int32_t>(s.blocks.size()))
        s.blocks.push_back(pool.take());
      b.token_ids.push_back(s.tokens[static_cast<size_t>(pos)]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(int64_t{s.blocks[static_cast<size_t>(pos / block_size)]} * block_size
                               + pos % block_size);
    }
    b.query_start_loc.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.seq_lens.push_back(s.computed);
    b.width = std::max(b.width, static_cast<int32_t>(s.blocks.size()));
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::vector<int32_t>& blocks = seqs[i]->blocks;
    b.block_table.insert(b.block_table.end(), blocks.begin(), blocks.end());
    b.block_table.resize(b.block_table.size() + (static_cast<size_t>(b.width) - blocks.size()), -1);
  }
  for (int32_t n = 0; n < padding; ++n) {
    b.token_ids.push_back(0);
    b.positions.push_back(0);
    b.slot_mapping.push_back(-1);
  }
  return b;
}

} // namespace kvactor::kernels::test
