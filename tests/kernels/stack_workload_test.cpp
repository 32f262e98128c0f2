// The default CPU model runs a short serving workload in well under a second: 8 requests
// prefilled, then 64 batched decode steps, bf16 cache in a BNHC layout. No timing: ctest's
// timeout is the guard, and the test reads like what a CPU rank does per step.
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

TEST(stack_workload, default_cpu_model_runs_64_decode_steps_of_8_requests) {
  attention_stack stack(default_cpu_model());
  const int32_t block_size = 16;
  stack_cache cache(stack, 64, block_size, element_type::bf16, cache_layout::bnhc);
  block_pool pool(64, 9);
  std::vector<sequence> seqs(8);
  std::vector<sequence*> all;
  std::vector<int32_t> prompt_counts;
  for (size_t r = 0; r < seqs.size(); ++r) {
    for (int32_t i = 0; i < 16 + static_cast<int32_t>(r); ++i)
      seqs[r].tokens.push_back(static_cast<int32_t>((r * 131 + static_cast<size_t>(i) * 7) % 512));
    all.push_back(&seqs[r]);
    prompt_counts.push_back(static_cast<int32_t>(seqs[r].tokens.size()));
  }
  std::vector<int32_t> counts = prompt_counts;
  for (int32_t step = 0; step <= 64; ++step) {
    const step_batch b = schedule(all, counts, pool, block_size);
    const std::vector<float> hidden = run_step(stack, cache, b);
    std::vector<int32_t> rows;
    for (int32_t r = 1; r <= b.num_reqs(); ++r)
      rows.push_back(b.query_start_loc[static_cast<size_t>(r)] - 1);
    const std::vector<int32_t> next = stack.sample(hidden.data(), rows);
    for (size_t r = 0; r < seqs.size(); ++r) {
      ASSERT_GE(next[r], 0);
      ASSERT_LT(next[r], 512);
      seqs[r].tokens.push_back(next[r]);
    }
    for (float x : hidden)
      ASSERT_TRUE(std::isfinite(x));
    counts.assign(seqs.size(), 1);
  }
  EXPECT_EQ(seqs[7].computed, 23 + 64);
}

} // namespace
} // namespace kvactor::kernels::test
