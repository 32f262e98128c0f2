// Prefix caching in the scheduler and the block manager: a request whose prompt starts with
// blocks an earlier request computed starts past them, sharing their blocks; a full hit still
// computes its last token; hybrid models cache nothing; a preempted request hits its own blocks.
#include <numeric>

#include <gtest/gtest.h>

#include "actors/driver/scheduler.hpp"
#include "tests/driver/driver_test_support.hpp"
#include "tests/driver/scheduler_test_support.hpp"

namespace kvactor {
namespace {

using test::full_group;
using test::run_step;
using test::sliding_group;
using tokens = std::vector<int32_t>;

tokens prompt_of(int32_t n, int32_t first = 1) {
  tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

scheduler_config caching(bool on = true) {
  scheduler_config c{8, 64, 1000, 1};
  c.enable_prefix_caching = on;
  return c;
}

const scheduled_request* scheduled(const step_plan& p, uint64_t id) {
  for (const auto& s : p.scheduled)
    if (s.request_id == id) return &s;
  return nullptr;
}

// Request 1 runs alone to the end (its 12-token prompt fills 3 blocks of 4), then request 2
// with the same first 10 tokens arrives.
TEST(PrefixCache, ASharedPrefixStartsTheNextRequestPastItsCachedFullBlocks) {
  scheduler s(caching(), {full_group(4)}, 64);
  ASSERT_TRUE(s.add_request(1, prompt_of(12), 2));
  run_step(s, 0);
  run_step(s, 1); // request 1 finishes: its blocks are free but stay cached
  ASSERT_EQ(s.find(1)->st, request_state::status::finished);
  tokens second = prompt_of(10);
  second.push_back(99);
  second.push_back(98);
  ASSERT_TRUE(s.add_request(2, second, 1));
  auto plan = s.schedule(2, 1);
  ASSERT_TRUE(plan);
  const auto* r2 = scheduled(*plan, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->num_computed_tokens, 8) << "blocks [1..4] and [5..8] hit; [9..12] differs";
  EXPECT_EQ(r2->token_ids, (tokens{9, 10, 99, 98}));
  EXPECT_EQ(s.num_prefix_hit_tokens(), 8);
  // Its table starts with request 1's first two blocks (the ranks get them in the plan).
  ASSERT_FALSE(plan->block_updates.empty());
  EXPECT_EQ(plan->block_updates.front().start, 0);
  EXPECT_EQ(plan->block_updates.front().block_ids.size(), 2u);
}

TEST(PrefixCache, AFullHitStillComputesTheLastTokenSoThatTheStepSamples) {
  scheduler s(caching(), {full_group(4)}, 64);
  ASSERT_TRUE(s.add_request(1, prompt_of(8), 1));
  run_step(s, 0);
  ASSERT_TRUE(s.add_request(2, prompt_of(8), 1)); // the same 8 tokens: two full blocks
  auto plan = s.schedule(1, 1);
  ASSERT_TRUE(plan);
  const auto* r2 = scheduled(*plan, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->num_computed_tokens, 4) << "the last block is computed again, not taken";
  EXPECT_TRUE(r2->sample);
}

TEST(PrefixCache, ConcurrentRequestsShareOneBlockWithOneReferenceEach) {
  scheduler s(caching(), {full_group(4)}, 64);
  ASSERT_TRUE(s.add_request(1, prompt_of(9), 5));
  run_step(s, 0); // request 1 computed 9 tokens: blocks 0 and 1 are full and cached
  ASSERT_TRUE(s.add_request(2, prompt_of(9), 5));
  run_step(s, 1);
  const auto t1 = s.blocks().table_of(1, 0), t2 = s.blocks().table_of(2, 0);
  ASSERT_GE(t1.size(), 2u);
  ASSERT_GE(t2.size(), 2u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_NE(t2[2], t1[2]) << "the partial block is each request's own";
  EXPECT_EQ(s.pool().ref_count(t1[0]), 2);
}

TEST(PrefixCache, OffOrHybridNothingIsShared) {
  for (bool hybrid : {false, true}) {
    scheduler s(caching(hybrid), // hybrid: on, but a sliding window group vetoes it
                hybrid ? std::vector<kv_cache_group>{full_group(4), sliding_group(4, 8)}
                       : std::vector<kv_cache_group>{full_group(4)},
                64);
    EXPECT_FALSE(s.blocks().caches_prefixes());
    ASSERT_TRUE(s.add_request(1, prompt_of(12), 1));
    run_step(s, 0);
    ASSERT_TRUE(s.add_request(2, prompt_of(12), 1));
    auto plan = s.schedule(1, 1);
    ASSERT_TRUE(plan);
    EXPECT_EQ(scheduled(*plan, 2)->num_computed_tokens, 0);
    EXPECT_EQ(s.num_prefix_hit_tokens(), 0);
  }
}

TEST(PrefixCache, APreemptedRequestHitsItsOwnBlocksWhenItComesBack) {
  // 6 usable blocks: request 1 (prompt 12 = 3 blocks) and request 2 (prompt 8 = 2 blocks) fit,
  // then their decodes need more than the pool has and the later one is preempted.
  scheduler s(caching(), {full_group(4)}, 7);
  ASSERT_TRUE(s.add_request(1, prompt_of(12), 8));
  ASSERT_TRUE(s.add_request(2, prompt_of(8, 100), 8));
  uint64_t seq = 0;
  while (s.num_preemptions() == 0 && s.has_work())
    run_step(s, seq++);
  ASSERT_GT(s.num_preemptions(), 0) << "the pool was meant to run out";
  const int64_t before = s.num_prefix_hit_tokens();
  while (s.has_work())
    run_step(s, seq++);
  EXPECT_GT(s.num_prefix_hit_tokens(), before) << "the comeback skipped its cached blocks";
  EXPECT_EQ(s.num_finished(), 2);
  EXPECT_EQ(s.pool().num_used(), 0) << "every reference given back";
}

} // namespace
} // namespace kvactor
