// Test support for the attention stack: per-layer caches, one step over a scheduled batch,
// greedy generation under a token budget, a host all-reduce for TP ranks on threads, and the
// bit-for-bit comparison of two results.
#pragma once

#include <gtest/gtest.h>

#include <barrier>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kvactor/kernels/attention_stack.h"
#include "paged_cache.hpp"

namespace kvactor::kernels::test {

/// A mixed stack over 8 q / 2 kv heads: full (RoPE), sliding window with sinks, MLA (RoPE on the
/// latent's tail), a layer sharing layer 0's cache, chunked local with softcap.
inline stack_config mixed_config(int32_t tp_size = 1, int32_t tp_rank = 0, uint64_t seed = 7) {
  stack_config cfg;
  cfg.hidden_size = 64;
  cfg.vocab_size = 128;
  cfg.seed = seed;
  cfg.tp_size = tp_size;
  cfg.tp_rank = tp_rank;
  cfg.total_q_heads = 8;
  cfg.total_kv_heads = 2;
  const int32_t hq = 8 / tp_size, hkv = std::max(1, 2 / tp_size);
  stack_layer full{stack_layer_kind::full, hq, hkv, 16, 0, 0, 0, 0.0f, false, true, -1};
  stack_layer window = full;
  window.kind = stack_layer_kind::sliding_window;
  window.sliding_window = 6;
  window.has_sinks = true;
  stack_layer mla{stack_layer_kind::mla, hq, 1, 32, 0, 0, 0, 0.0f, false, true, -1};
  stack_layer shared = full;
  shared.shares_kv_with = 0;
  stack_layer chunked = full;
  chunked.kind = stack_layer_kind::chunked_local;
  chunked.chunk_size = 8;
  chunked.softcap = 20.0f;
  chunked.head_size_v = 8;
  cfg.layers = {full, window, mla, shared, chunked};
  return cfg;
}

/// One cache buffer per layer that owns a cache; sharing layers get their target's view.
struct stack_cache {
  std::vector<std::unique_ptr<cache_buffer>> buffers;
  std::vector<kv_view> views;

  stack_cache(const attention_stack& stack, int64_t num_blocks, int32_t block_size,
              element_type type = element_type::f32, cache_layout layout = cache_layout::bhnc) {
    for (size_t l = 0; l < stack.config().layers.size(); ++l) {
      const layer_geometry& g = stack.geometry(l);
      if (g.kv_source != static_cast<int32_t>(l)) {
        buffers.emplace_back();
        views.push_back(views[static_cast<size_t>(g.kv_source)]);
        continue;
      }
      buffers.push_back(std::make_unique<cache_buffer>(type, num_blocks, g.kv_heads, block_size,
                                                       g.content, layout));
      views.push_back(buffers.back()->view());
    }
  }
  bool same_bytes(const stack_cache& other) const {
    for (size_t l = 0; l < buffers.size(); ++l)
      if (buffers[l] && !buffers[l]->same_bytes(*other.buffers[l])) return false;
    return true;
  }
};

/// Runs `b` through every layer (one KV cache group: the same metadata for all layers).
inline std::vector<float> run_step(const attention_stack& stack, const stack_cache& cache,
                                   const step_batch& b,
                                   const std::function<void(float*, size_t)>& all_reduce = {}) {
  const layer_batch lb = b.layer();
  const std::vector<const layer_batch*> batch(stack.config().layers.size(), &lb);
  std::vector<float> hidden(static_cast<size_t>(b.num_tokens() * stack.config().hidden_size));
  stack.forward(b.token_ids.data(), b.positions.data(), b.num_tokens(), cache.views, batch,
                all_reduce, hidden.data());
  return hidden;
}

/// Greedy generation of `max_new` tokens per prompt. Each step takes, in request order, as many
/// uncomputed tokens of each unfinished request as the `budget` allows (prefill chunks and
/// decodes mixed); `serial` schedules one request per step. Returns the generated tokens; with
/// `sampled_rows`, (*sampled_rows)[r][k] is the hidden row request r's k-th token came from.
inline std::vector<std::vector<int32_t>>
generate(const attention_stack& stack, const std::vector<std::vector<int32_t>>& prompts,
         int32_t max_new, int32_t budget, bool serial, int32_t block_size, uint32_t pool_seed,
         std::vector<std::vector<std::vector<float>>>* sampled_rows = nullptr) {
  const int32_t hidden_size = stack.config().hidden_size;
  stack_cache cache(stack, 64, block_size);
  block_pool pool(64, pool_seed);
  std::vector<sequence> seqs(prompts.size());
  std::vector<std::vector<int32_t>> generated(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r)
    seqs[r].tokens = prompts[r];
  if (sampled_rows != nullptr) sampled_rows->assign(prompts.size(), {});
  for (;;) {
    std::vector<sequence*> picked;
    std::vector<int32_t> counts;
    std::vector<size_t> ids;
    int32_t left = budget;
    for (size_t r = 0; r < seqs.size() && left > 0; ++r) {
      if (static_cast<int32_t>(generated[r].size()) == max_new) continue;
      const int32_t n =
          std::min(static_cast<int32_t>(seqs[r].tokens.size()) - seqs[r].computed, left);
      picked.push_back(&seqs[r]);
      counts.push_back(n);
      ids.push_back(r);
      left -= n;
      if (serial) break;
    }
    if (picked.empty()) break;
    const step_batch b = schedule(picked, counts, pool, block_size);
    const std::vector<float> hidden = run_step(stack, cache, b);
    for (size_t i = 0; i < picked.size(); ++i) {
      sequence& s = *picked[i];
      if (s.computed != static_cast<int32_t>(s.tokens.size())) continue; // prefill continues
      const int32_t row = b.query_start_loc[i + 1] - 1;
      const int32_t token = stack.sample(hidden.data(), {row})[0];
      s.tokens.push_back(token);
      generated[ids[i]].push_back(token);
      if (sampled_rows != nullptr)
        (*sampled_rows)[ids[i]].emplace_back(hidden.begin() + int64_t{row} * hidden_size,
                                             hidden.begin() + int64_t{row + 1} * hidden_size);
    }
  }
  return generated;
}

/// Sums the ranks' buffers in rank order and hands every rank the same bits, as a
/// deterministic host communicator would. Each rank calls it from its own thread.
class host_all_reduce {
public:
  explicit host_all_reduce(int32_t ranks) : barrier_(ranks), buffers_(static_cast<size_t>(ranks)) {}

  void operator()(int32_t rank, float* buffer, size_t count) {
    buffers_[static_cast<size_t>(rank)] = buffer;
    barrier_.arrive_and_wait();
    if (rank == 0) {
      sum_.assign(count, 0.0f);
      for (float* b : buffers_)
        for (size_t i = 0; i < count; ++i)
          sum_[i] += b[i];
    }
    barrier_.arrive_and_wait();
    std::copy(sum_.begin(), sum_.end(), buffer);
    barrier_.arrive_and_wait(); // nobody starts the next round while another still copies
  }

private:
  std::barrier<> barrier_;
  std::vector<float*> buffers_;
  std::vector<float> sum_;
};

/// Whether `b` holds the same bits as `a`, element for element (sizes first), naming the first
/// difference. An element with every bit set (the 0xff fill with which the GPU tests mark memory
/// not yet written, a NaN) fails too: two unwritten results would otherwise compare equal.
inline ::testing::AssertionResult bit_identical(const std::vector<float>& a,
                                                const std::vector<float>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " and " << b.size();
  const auto unwritten = [](float x) {
    uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    return bits == 0xffffffffu;
  };
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (unwritten(a[i]) || unwritten(b[i]))
      return ::testing::AssertionFailure() << "element " << i << " was not written";
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  }
  if (differ == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << differ << " of " << a.size() << " elements differ; the first, " << first << ": "
         << a[first] << " and " << b[first];
}

} // namespace kvactor::kernels::test
