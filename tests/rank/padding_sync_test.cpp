// Tensor-parallel ranks with CUDA graphs agree at every step on what they replay
// (docs/vllm-semantics.md §8.2): each reports its batch and what it dispatched, one gather hands
// every rank every row, and all reach the same decision: run as dispatched when they agree,
// otherwise every rank eager or every rank re-dispatched to the largest batch.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "actors/rank/padding_sync.hpp"
#include "actors/rank/step_slicing.hpp"
#include "kvactor/comm/host_communicator.h"

namespace kvactor {
namespace {

step_batch decode_batch(int32_t reqs) {
  step_batch b;
  for (int32_t i = 0; i < reqs; ++i) {
    b.request_ids.push_back(static_cast<uint64_t>(i + 1));
    b.token_ids.push_back(7);
    b.positions.push_back(40 + i);
  }
  b.max_query_len = 1;
  return b;
}

batch_descriptor graph(cudagraph_mode mode, int32_t tokens) {
  return {mode, tokens, mode == cudagraph_mode::full ? tokens : 0, 0, 0, 0, false, 1};
}

TEST(PaddingSync, ARankReportsItsBatchAndWhatItDispatched) {
  const auto row = padding_row_of(decode_batch(3), graph(cudagraph_mode::full, 4));
  EXPECT_EQ(row.num_tokens, 3);
  EXPECT_EQ(row.num_reqs, 3);
  EXPECT_EQ(row.mode, cudagraph_mode::full);
  EXPECT_EQ(row.uniform_token_count, 1);
  EXPECT_TRUE(row.alive);
}

TEST(PaddingSync, RanksThatDispatchedAlikeRunAsDispatched) {
  const auto row = padding_row_of(decode_batch(3), graph(cudagraph_mode::full, 4));
  const auto s = settle_padding({row, row, row}, 1);
  EXPECT_TRUE(s.unanimous);
  EXPECT_FALSE(s.agreement.redispatch);
}

TEST(PaddingSync, OneRankThatWouldRunEagerlyMakesEveryRankEager) {
  const auto b = decode_batch(3);
  const auto with_graph = padding_row_of(b, graph(cudagraph_mode::full, 4));
  const auto eager = padding_row_of(b, eager_step(b));
  for (int32_t self : {0, 1}) {
    const auto s = settle_padding({with_graph, eager}, self);
    EXPECT_FALSE(s.unanimous);
    EXPECT_TRUE(s.agreement.eager) << "rank " << self;
    EXPECT_FALSE(s.agreement.redispatch);
  }
}

TEST(PaddingSync, RanksWithDifferentGraphsRedispatchToTheLargestBatchAtTheLowerMode) {
  const auto full = padding_row_of(decode_batch(3), graph(cudagraph_mode::full, 4));
  const auto piecewise = padding_row_of(decode_batch(5), graph(cudagraph_mode::piecewise, 8));
  const auto s = settle_padding({full, piecewise}, 0);
  EXPECT_FALSE(s.unanimous);
  EXPECT_TRUE(s.agreement.redispatch);
  EXPECT_EQ(s.agreement.synced_tokens, 5);
}

TEST(PaddingSync, EveryRankOfAHostGroupReachesTheSameDecisionFromOneGather) {
  auto group = comm::host_communicator::create_group(3, std::chrono::seconds(30));
  const auto b = decode_batch(3);
  std::vector<padding_sync> decided(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      // Rank 2 could not use its graph this step: it would run eagerly.
      const auto mine = r == 2 ? eager_step(b) : graph(cudagraph_mode::full, 4);
      decided[static_cast<size_t>(r)] = sync_padding(*group[static_cast<size_t>(r)], b, mine);
    });
  for (auto& t : threads)
    t.join();
  for (const auto& d : decided) {
    EXPECT_FALSE(d.unanimous);
    EXPECT_TRUE(d.agreement.eager);
  }
  EXPECT_TRUE(group[0]->take_captured().empty()) << "host communicators capture nothing";
}

} // namespace
} // namespace kvactor
