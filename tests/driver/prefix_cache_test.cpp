// Prefix caching in the scheduler and the block manager: a request whose prompt starts with
// blocks an earlier request computed starts past them, sharing their blocks; a full hit still
// computes its last token; window groups hit with the blocks their window reads; a state group
// vetoes caching; a preempted request hits its own blocks.
#include <map>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "actors/driver/scheduler.hpp"
#include "tests/driver/driver_test_support.hpp"
#include "tests/driver/scheduler_test_support.hpp"

namespace kvactor {
namespace {

using test::chunked_group;
using test::full_group;
using test::mamba_group;
using test::run_step;
using test::sliding_group;
using tokens = std::vector<int32_t>;

tokens prompt_of(int32_t n, int32_t first = 1) {
  tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

scheduler_config caching(bool on = true) {
  scheduler_config c{{8, 64, 1000}, 1};
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

TEST(PrefixCache, OffOrWithAStateGroupNothingIsShared) {
  for (bool state : {false, true}) {
    scheduler s(caching(state), // state: on, but a mamba group vetoes it
                state ? std::vector<kv_cache_group>{full_group(4), mamba_group(4)}
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

TEST(PrefixCache, GroupsWithDifferentBlockSizesCacheNothing) {
  block_pool pool(64);
  kv_block_manager m({full_group(4), full_group(8, "full.1")}, pool);
  m.set_prefix_caching(true);
  EXPECT_FALSE(m.caches_prefixes());
}

TEST(PrefixCache, AHybridModelHitsInEveryGroupAndLeavesTheWindowsEarlierBlocksNull) {
  scheduler s(caching(), {full_group(4), sliding_group(4, 8)}, 64);
  ASSERT_TRUE(s.blocks().caches_prefixes());
  ASSERT_TRUE(s.add_request(1, prompt_of(16), 4));
  run_step(s, 0);
  // Request 1's next step releases its window blocks 0 and 1: they stay cached.
  const auto full1 = s.blocks().table_of(1, 0), window1 = s.blocks().table_of(1, 1);
  ASSERT_TRUE(s.add_request(2, prompt_of(16), 1));
  auto plan = s.schedule(1, 1);
  ASSERT_TRUE(plan);
  EXPECT_EQ(scheduled(*plan, 2)->num_computed_tokens, 12) << "3 blocks hit, the last recomputed";
  const auto full = s.blocks().table_of(2, 0), window = s.blocks().table_of(2, 1);
  ASSERT_GE(full1.size(), 4u);
  ASSERT_GE(window1.size(), 4u);
  ASSERT_GE(full.size(), 3u);
  ASSERT_GE(window.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(full.begin(), full.begin() + 3),
            std::vector<int32_t>(full1.begin(), full1.begin() + 3));
  // Position 12 reads [5, 12]: blocks 1 and 2 of the window group; block 0 is never read again.
  EXPECT_EQ(window[0], null_block_id);
  EXPECT_EQ(window[1], window1[1]);
  EXPECT_EQ(window[2], window1[2]);
}

// Request 1's 16 tokens fill 4 blocks in each group, then its blocks are freed (tails first) and
// another user of the pool takes one block: the window group's last block is evicted.
TEST(PrefixCache, AnEvictedWindowBlockShortensTheHitOfEveryGroup) {
  block_pool pool(9); // 8 usable: exactly request 1's blocks
  kv_block_manager m({sliding_group(4, 8), full_group(4)}, pool);
  m.set_prefix_caching(true);
  const auto t = prompt_of(16);
  ASSERT_TRUE(m.allocate(1, 0, 16));
  m.cache_full_blocks(1, t, 16);
  const auto window1 = m.table_of(1, 0), full1 = m.table_of(1, 1);
  m.free(1);
  kv_block_manager other({full_group(4)}, pool);
  ASSERT_TRUE(other.allocate(9, 0, 4));
  EXPECT_EQ(pool.find_cached(hash_block({}, std::span(t).first(4), 0)).has_value(), true);

  std::vector<block_table_update> updates;
  EXPECT_EQ(m.take_cached_prefix(2, t, 16, updates), 12)
      << "at 16 the window needs blocks 2 and 3 (3 is gone); at 12 it needs 1 and 2";
  EXPECT_EQ(m.table_of(2, 0), (std::vector<int32_t>{null_block_id, window1[1], window1[2]}));
  EXPECT_EQ(m.table_of(2, 1), (std::vector<int32_t>{full1[0], full1[1], full1[2]}));
  EXPECT_EQ(pool.ref_count(window1[0]), 0) << "a block outside the window is not taken";
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].block_ids, m.table_of(2, 0));
}

TEST(PrefixCache, AChunkedLocalGroupHitsWithTheBlocksOfTheCurrentChunk) {
  block_pool pool(64);
  kv_block_manager m({full_group(4), chunked_group(4, 8)}, pool);
  m.set_prefix_caching(true);
  const auto t = prompt_of(20);
  ASSERT_TRUE(m.allocate(1, 0, 20));
  m.cache_full_blocks(1, t, 20);
  const auto local1 = m.table_of(1, 1);
  m.free(1);
  std::vector<block_table_update> updates;
  EXPECT_EQ(m.take_cached_prefix(2, t, 19, updates), 16);
  // Position 16 starts chunk [16, 24): nothing before it is read, so the table is all null.
  EXPECT_EQ(m.table_of(2, 1), (std::vector<int32_t>(4, null_block_id)));
  EXPECT_EQ(m.num_blocks_of(2), 4);
  EXPECT_EQ(m.take_cached_prefix(3, t, 15, updates), 12);
  EXPECT_EQ(m.table_of(3, 1), (std::vector<int32_t>{null_block_id, null_block_id, local1[2]}));
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

// Random arrivals with three shared prefixes into a pool too small for them all (preemptions,
// evictions), for a full-attention model and two hybrids. After every step: each block's
// reference count equals the table entries that hold it, the free queue holds exactly the
// unreferenced blocks, and a block two requests share sits at the same position of both, under
// the same tokens. At the end every reference is given back.
TEST(PrefixCache, RandomSharedPrefixesKeepEveryBlockOwnedOnceAndItsContentsAgreed) {
  const std::vector<std::vector<kv_cache_group>> models{
      {full_group(4)},
      {full_group(4), sliding_group(4, 8)},
      {chunked_group(4, 8), full_group(4), sliding_group(4, 5, "swa.1")}};
  for (size_t mi = 0; mi < models.size(); ++mi) {
    SCOPED_TRACE("model " + std::to_string(mi));
    const auto& groups = models[mi];
    const auto num_blocks = static_cast<int32_t>(16 + 16 * groups.size());
    scheduler_config cfg{{8, 32, 1000}, 1, 0, true};
    scheduler s(cfg, groups, num_blocks);
    std::mt19937 rng(static_cast<unsigned>(11 + mi));
    std::vector<tokens> prefixes;
    for (int32_t p = 0; p < 3; ++p)
      prefixes.push_back(prompt_of(8 + 6 * p, 1000 * (p + 1)));
    std::vector<uint64_t> live;
    uint64_t next_id = 1, seq = 0;
    auto check = [&] {
      std::map<int32_t, int32_t> held; // block -> entries holding it
      std::map<std::pair<size_t, int32_t>, std::pair<uint64_t, size_t>> first_holder;
      for (auto id : live) {
        const auto* r = s.find(id);
        for (size_t g = 0; g < groups.size(); ++g) {
          const auto table = s.blocks().table_of(id, static_cast<int32_t>(g));
          for (size_t k = 0; k < table.size(); ++k) {
            if (table[k] == null_block_id) continue;
            ++held[table[k]];
            auto [it, fresh] = first_holder.try_emplace({g, table[k]}, id, k);
            if (fresh) continue;
            ASSERT_EQ(it->second.second, k) << "block " << table[k] << " at two positions";
            const auto* other = s.find(it->second.first);
            const auto end = static_cast<int32_t>((k + 1) * 4);
            ASSERT_GE(num_tokens(*r), end);
            ASSERT_GE(num_tokens(*other), end);
            for (int32_t pos = 0; pos < end; ++pos)
              ASSERT_EQ(token_at(*r, pos), token_at(*other, pos))
                  << "block " << table[k] << " shared by requests " << id << " and "
                  << it->second.first << " under different tokens";
          }
        }
      }
      int32_t unreferenced = 0;
      for (int32_t b = 1; b < num_blocks; ++b) {
        const auto h = held.contains(b) ? held[b] : 0;
        ASSERT_EQ(s.pool().ref_count(b), h) << "block " << b;
        unreferenced += h == 0;
      }
      ASSERT_EQ(s.pool().num_free(), unreferenced);
    };
    while (next_id <= 300 || s.has_work()) {
      for (int a = static_cast<int>(rng() % 3); a > 0 && next_id <= 300; --a) {
        tokens prompt = prefixes[rng() % prefixes.size()];
        for (auto extra = rng() % 14; extra > 0; --extra)
          prompt.push_back(static_cast<int32_t>(rng() % 50));
        ASSERT_TRUE(s.add_request(next_id, prompt, static_cast<int32_t>(1 + rng() % 24)));
        live.push_back(next_id++);
      }
      run_step(s, seq++);
      std::erase_if(live,
                    [&](uint64_t id) { return s.find(id)->st == request_state::status::finished; });
      check();
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(s.num_finished(), 300);
    EXPECT_GT(s.num_prefix_hit_tokens(), 0);
    EXPECT_GT(s.num_preemptions(), 0) << "the pool was meant to run out";
    EXPECT_EQ(s.pool().num_used(), 0);
  }
}

// Two requests with one prompt (n = 2, or a burst with one system prompt) arrive together.
TEST(PrefixCache, ARequestSharingBlocksInTheComputingWaitsForThemAndThenHitsThem) {
  scheduler s(caching(), {full_group(4)}, 64);
  ASSERT_TRUE(s.add_request(1, prompt_of(13), 2));
  ASSERT_TRUE(s.add_request(2, prompt_of(13), 2));
  tokens other = prompt_of(13, 100);
  ASSERT_TRUE(s.add_request(3, other, 2)); // shares nothing: not held
  auto first = s.schedule(0, 1);
  ASSERT_TRUE(first);
  EXPECT_NE(scheduled(*first, 1), nullptr);
  EXPECT_EQ(scheduled(*first, 2), nullptr) << "held: request 1 is computing its blocks";
  EXPECT_NE(scheduled(*first, 3), nullptr) << "a later request that shares nothing goes first";
  ASSERT_TRUE(s.apply(test::fake_done(*first)));
  auto second = s.schedule(1, 1);
  ASSERT_TRUE(second);
  const auto* r2 = scheduled(*second, 2);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->num_computed_tokens, 12) << "three full blocks from request 1";
  EXPECT_EQ(s.num_prefix_hit_tokens(), 12);
}

TEST(PrefixCache, WithoutCachingRequestsArriveTogetherAreAdmittedTogether) {
  scheduler s(caching(false), {full_group(4)}, 64);
  ASSERT_TRUE(s.add_request(1, prompt_of(13), 2));
  ASSERT_TRUE(s.add_request(2, prompt_of(13), 2));
  auto plan = s.schedule(0, 1);
  ASSERT_TRUE(plan);
  EXPECT_NE(scheduled(*plan, 2), nullptr);
}

TEST(PrefixCache, AHeldRequestIsAdmittedOnceItsHolderIsGoneEvenWithoutTheBlocks) {
  scheduler s(caching(), {full_group(4)}, 64);
  ASSERT_TRUE(s.add_request(1, prompt_of(13), 2));
  ASSERT_TRUE(s.add_request(2, prompt_of(13), 2));
  auto first = s.schedule(0, 1);
  ASSERT_TRUE(first);
  ASSERT_EQ(scheduled(*first, 2), nullptr);
  s.fail_request(1, "aborted"); // before its step was applied: nothing was cached
  auto second = s.schedule(1, 1);
  ASSERT_TRUE(second);
  const auto* r2 = scheduled(*second, 2);
  ASSERT_NE(r2, nullptr) << "nothing computes its blocks any more: it computes them itself";
  EXPECT_EQ(r2->num_computed_tokens, 0);
}

TEST(PrefixHold, TheChainCoversTheFullBlocksBeforeTheLastTokenAndIsPrefixChained) {
  const tokens t = prompt_of(13);
  const auto c = prefix_hold::chain_of(t, 4);
  EXPECT_EQ(c.size(), 3u) << "(13 - 1) / 4 full blocks";
  EXPECT_EQ(prefix_hold::chain_of(prompt_of(12), 4).size(), 2u) << "the last token is computed";
  tokens shifted = t;
  shifted[0] = 999;
  const auto d = prefix_hold::chain_of(shifted, 4);
  EXPECT_NE(c[2], d[2]) << "a block after a different prefix differs";
  EXPECT_TRUE(prefix_hold::chain_of({}, 4).empty());
}

} // namespace
} // namespace kvactor
