// attention_stack: config validation, determinism from the seed, greedy sampling, step checks.
#include <gtest/gtest.h>

#include <cstring>

#include "expect_invalid.hpp"
#include "stack_fixture.hpp"

namespace kvactor::kernels::test {
namespace {

template <class F>
void expect_config_rejected(F&& mutate, const std::string& needle) {
  stack_config cfg = mixed_config();
  mutate(cfg);
  expect_invalid([&] { attention_stack stack(cfg); }, needle);
}

TEST(attention_stack, rejects_inconsistent_configs) {
  expect_config_rejected([](stack_config& c) { c.tp_size = 3; }, "total_q_heads: 8");
  expect_config_rejected([](stack_config& c) { c.tp_rank = 1; }, "tp_rank: 1");
  expect_config_rejected([](stack_config& c) { c.total_kv_heads = 3; }, "total_kv_heads: 3");
  expect_config_rejected([](stack_config& c) { c.layers.clear(); }, "layers: is empty");
  expect_config_rejected([](stack_config& c) { c.layers[1].num_q_heads = 4; },
                         "layers[1].num_q_heads: 4");
  expect_config_rejected([](stack_config& c) { c.layers[0].num_kv_heads = 1; },
                         "layers[0].num_kv_heads: 1");
  expect_config_rejected([](stack_config& c) { c.layers[2].num_kv_heads = 2; },
                         "layers[2].num_kv_heads: 2 must be 1 for MLA");
  expect_config_rejected([](stack_config& c) { c.layers[1].sliding_window = 0; },
                         "layers[1].sliding_window: 0 must be > 0");
  expect_config_rejected([](stack_config& c) { c.layers[0].chunk_size = 4; },
                         "layers[0].chunk_size: 4 must be 0 for a full layer");
  expect_config_rejected([](stack_config& c) { c.layers[0].head_size = 15; },
                         "layers[0].head_size: 15 must be even for RoPE");
  expect_config_rejected([](stack_config& c) { c.layers[2].head_size_v = 31; },
                         "layers[2].head_size: 32 leaves a RoPE tail of 1");
  expect_config_rejected([](stack_config& c) { c.layers[1].softcap = -1.0f; },
                         "layers[1].softcap: -1");
  expect_config_rejected([](stack_config& c) { c.layers[1].shares_kv_with = 1; },
                         "layers[1].shares_kv_with: 1 is not an earlier layer");
  expect_config_rejected([](stack_config& c) { c.layers[1].shares_kv_with = 4; },
                         "layers[1].shares_kv_with: 4 is not an earlier layer");
  expect_config_rejected([](stack_config& c) { c.layers[4].shares_kv_with = 3; },
                         "layers[4].shares_kv_with: 3 itself shares layer 0");
  expect_config_rejected([](stack_config& c) { c.layers[3].shares_kv_with = 2; },
                         "layers[3].shares_kv_with: 2 has a different cache entry");
  expect_config_rejected([](stack_config& c) { c.layers[4].shares_kv_with = 0; },
                         "layers[4].shares_kv_with: 0 has a different cache entry");
}

TEST(attention_stack, derives_the_geometry_of_each_rank) {
  stack_config cfg = mixed_config(4, 3);
  attention_stack stack(cfg);
  EXPECT_EQ(stack.geometry(0).q_heads, 2);
  EXPECT_EQ(stack.geometry(0).q_head_begin, 6);
  EXPECT_EQ(stack.geometry(0).kv_heads, 1);
  EXPECT_EQ(stack.geometry(0).kv_head_begin, 1); // 2 kv heads over 4 ranks: ranks 2, 3 hold 1
  EXPECT_EQ(stack.geometry(0).content, 32);
  EXPECT_EQ(stack.geometry(2).content, 32); // MLA: the latent
  EXPECT_EQ(stack.geometry(2).v_size, 16);
  EXPECT_EQ(stack.geometry(2).rope_offset, 16);
  EXPECT_EQ(stack.geometry(3).kv_source, 0);
  EXPECT_EQ(stack.geometry(4).content, 24);
  EXPECT_NE(stack.layer_attention(1).sinks, nullptr);
  EXPECT_FLOAT_EQ(stack.layer_attention(0).scale, 0.25f);
}

// Prefills three prompts in one step on a fresh cache; returns the hidden states and tokens.
std::pair<std::vector<float>, std::vector<int32_t>> prefill(const stack_config& cfg) {
  attention_stack stack(cfg);
  stack_cache cache(stack, 32, 4);
  block_pool pool(32, 3);
  std::vector<sequence> seqs(3);
  seqs[0].tokens = {5, 9, 2, 77, 100, 3, 3};
  seqs[1].tokens = {1};
  seqs[2].tokens = {8, 6, 4, 2, 0, 127, 64, 32, 16, 8, 4};
  const step_batch b = schedule({&seqs[0], &seqs[1], &seqs[2]}, {7, 1, 11}, pool, 4);
  std::vector<float> hidden = run_step(stack, cache, b);
  return {hidden, stack.sample(hidden.data(), {6, 7, 18})};
}

TEST(attention_stack, same_seed_gives_identical_results) {
  const auto a = prefill(mixed_config());
  const auto b = prefill(mixed_config());
  ASSERT_EQ(a.first.size(), b.first.size());
  EXPECT_EQ(std::memcmp(a.first.data(), b.first.data(), a.first.size() * sizeof(float)), 0);
  EXPECT_EQ(a.second, b.second);
  for (float x : a.first)
    ASSERT_TRUE(std::isfinite(x));
}

TEST(attention_stack, different_seed_gives_different_results) {
  const auto a = prefill(mixed_config(1, 0, 7));
  const auto b = prefill(mixed_config(1, 0, 8));
  size_t differing = 0;
  for (size_t i = 0; i < a.first.size(); ++i)
    differing += a.first[i] != b.first[i];
  // Every weight differs, so every hidden value does: none of the 21 x 64 floats coincides.
  EXPECT_EQ(differing, a.first.size());
}

TEST(attention_stack, sample_takes_the_lowest_index_on_ties) {
  attention_stack stack(mixed_config());
  // A zero row normalises to zero: every logit is 0, so token 0 wins the tie.
  const std::vector<float> hidden(2 * 64, 0.0f);
  EXPECT_EQ(stack.sample(hidden.data(), {0, 1}), (std::vector<int32_t>{0, 0}));
}

TEST(attention_stack, checks_the_whole_step_before_writing) {
  attention_stack stack(mixed_config());
  stack_cache cache(stack, 8, 4);
  stack_cache untouched(stack, 8, 4);
  block_pool pool(8, 1);
  std::vector<sequence> seqs(2);
  seqs[0].tokens = {1, 2, 3};
  seqs[1].tokens = {4, 5};
  step_batch b = schedule({&seqs[0], &seqs[1]}, {3, 2}, pool, 4);
  b.positions[4] = 0; // request 1's second token sits at position 1
  expect_invalid([&] { run_step(stack, cache, b); }, "positions[4]: 0 but batch[0] puts it at 1");
  EXPECT_TRUE(cache.same_bytes(untouched));

  b.positions[4] = 1;
  b.slot_mapping[0] = 32; // beyond 8 blocks of 4
  expect_invalid([&] { run_step(stack, cache, b); }, "write_kv: slot_mapping[0]: 32");
  EXPECT_TRUE(cache.same_bytes(untouched));

  b.slot_mapping[0] = 0;
  const layer_batch lb = b.layer();
  std::vector<const layer_batch*> batch(5, &lb);
  std::vector<float> hidden(5 * 64);
  expect_invalid(
      [&] {
        stack.forward(b.token_ids.data(), b.positions.data(), 5, {cache.views[0]}, batch, {},
                      hidden.data());
      },
      "kv: 1 views for 5 layers");
  batch[2] = nullptr;
  expect_invalid(
      [&] {
        stack.forward(b.token_ids.data(), b.positions.data(), 5, cache.views, batch, {},
                      hidden.data());
      },
      "batch[2]: is null");
  attention_stack tp2(mixed_config(2, 0));
  expect_invalid([&] { run_step(tp2, stack_cache(tp2, 8, 4), b); }, "all_reduce: empty");
}

} // namespace
} // namespace kvactor::kernels::test
