// The default CPU model runs a short serving workload in well under a second: 8 requests
// prefilled, then 64 batched decode steps, bf16 cache in a BNHC layout, and every request gets
// exactly the tokens it gets when served alone. No timing: ctest's timeout is the guard, and the
// test reads like what a CPU rank does per step.
#include <gtest/gtest.h>

#include <cmath>

#include "stack_fixture.hpp"

namespace kvactor::kernels::test {
namespace {

stack_config default_cpu_model() {
  stack_config cfg;
  cfg.hidden_size = 256;
  cfg.vocab_size = 512;
  cfg.seed = 2024;
  cfg.total_q_heads = 8;
  cfg.total_kv_heads = 2;
  stack_layer full{stack_layer_kind::full, 8, 2, 32, 0, 0, 0, 0.0f, false, true, -1};
  stack_layer window = full;
  window.kind = stack_layer_kind::sliding_window;
  window.sliding_window = 32;
  stack_layer chunked = full;
  chunked.kind = stack_layer_kind::chunked_local;
  chunked.chunk_size = 64;
  cfg.layers = {full, window, chunked, full};
  return cfg;
}

// Greedy generation for `prompts`: the whole prompt in the first step, then one token per step
// for `decodes` steps, all requests batched in every step on one bf16 BNHC cache.
std::vector<std::vector<int32_t>> serve(const attention_stack& stack,
                                        const std::vector<std::vector<int32_t>>& prompts,
                                        int32_t decodes) {
  const int32_t block_size = 16;
  stack_cache cache(stack, 64, block_size, element_type::bf16, cache_layout::bnhc);
  block_pool pool(64, 9);
  std::vector<sequence> seqs(prompts.size());
  std::vector<sequence*> all;
  std::vector<int32_t> counts;
  for (size_t r = 0; r < prompts.size(); ++r) {
    seqs[r].tokens = prompts[r];
    all.push_back(&seqs[r]);
    counts.push_back(static_cast<int32_t>(prompts[r].size()));
  }
  std::vector<std::vector<int32_t>> generated(prompts.size());
  for (int32_t step = 0; step <= decodes; ++step) {
    const step_batch b = schedule(all, counts, pool, block_size);
    const std::vector<float> hidden = run_step(stack, cache, b);
    for (float x : hidden)
      EXPECT_TRUE(std::isfinite(x)) << "step " << step;
    std::vector<int32_t> rows;
    for (int32_t r = 1; r <= b.num_reqs(); ++r)
      rows.push_back(b.query_start_loc[static_cast<size_t>(r)] - 1);
    const std::vector<int32_t> next = stack.sample(hidden.data(), rows);
    for (size_t r = 0; r < seqs.size(); ++r) {
      seqs[r].tokens.push_back(next[r]);
      generated[r].push_back(next[r]);
    }
    counts.assign(seqs.size(), 1);
  }
  EXPECT_EQ(seqs.back().computed, static_cast<int32_t>(prompts.back().size()) + decodes);
  return generated;
}

TEST(stack_workload, default_cpu_model_runs_64_decode_steps_of_8_requests) {
  attention_stack stack(default_cpu_model());
  std::vector<std::vector<int32_t>> prompts(8);
  for (size_t r = 0; r < prompts.size(); ++r)
    for (int32_t i = 0; i < 16 + static_cast<int32_t>(r); ++i)
      prompts[r].push_back(static_cast<int32_t>((r * 131 + static_cast<size_t>(i) * 7) % 512));
  const auto batched = serve(stack, prompts, 64);
  // Reference: each request served alone on a cache of its own. The stack's arithmetic does not
  // depend on the batch, so every one of the 65 tokens of every request is the same, exactly.
  for (size_t r = 0; r < prompts.size(); ++r) {
    const auto alone = serve(stack, {prompts[r]}, 64);
    ASSERT_EQ(batched[r].size(), 65u);
    EXPECT_EQ(batched[r], alone.front()) << "request " << r;
  }
}

} // namespace
} // namespace kvactor::kernels::test
