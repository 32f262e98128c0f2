#include "actors/cudagraph/dispatcher.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "actors/cudagraph/planner.hpp"

namespace kvactor {
namespace {

cudagraph_plan make_plan(cudagraph_mode mode, int32_t q = 1, int32_t max_num_seqs = 256,
                         std::vector<int32_t> capture_sizes = {}) {
  cudagraph_options opt;
  opt.requested = mode;
  opt.uniform_decode_query_len = q;
  opt.max_num_seqs = max_num_seqs;
  opt.capture_sizes = std::move(capture_sizes);
  auto plan = plan_cudagraphs(opt);
  EXPECT_TRUE(plan) << plan.err().message;
  return plan ? *plan : cudagraph_plan{};
}

TEST(CudaGraphUniformTokenCount, IsQWhenEveryRequestHasQTokens) {
  EXPECT_EQ(uniform_token_count(4, 4, 1), 1);
  EXPECT_EQ(uniform_token_count(4, 12, 3), 3);
}

TEST(CudaGraphUniformTokenCount, IsZeroForMixedBatchesOrNoRequests) {
  EXPECT_EQ(uniform_token_count(4, 5, 1), 0);
  EXPECT_EQ(uniform_token_count(4, 11, 3), 0);
  EXPECT_EQ(uniform_token_count(0, 0, 1), 0);
}

TEST(CudaGraphDispatch, PureDecodeBatchReplaysSmallestFullGraphWithPaddedRequests) {
  graph_dispatcher g(make_plan(cudagraph_mode::full_and_piecewise), 256);
  auto d = g.dispatch(5, 5, uniform_token_count(5, 5, 1));
  EXPECT_EQ(d.mode, cudagraph_mode::full);
  EXPECT_EQ(d.num_tokens, 8);
  EXPECT_EQ(d.num_reqs, 8);
  EXPECT_EQ(d.uniform_token_count, 1);
  auto exact = g.dispatch(256, 256, 1);
  EXPECT_EQ(exact.mode, cudagraph_mode::full);
  EXPECT_EQ(exact.num_tokens, 256);
}

TEST(CudaGraphDispatch, MixedBatchReplaysSmallestPiecewiseGraph) {
  graph_dispatcher g(make_plan(cudagraph_mode::full_and_piecewise), 256);
  auto d = g.dispatch(3, 100, uniform_token_count(3, 100, 1));
  EXPECT_EQ(d.mode, cudagraph_mode::piecewise);
  EXPECT_EQ(d.num_tokens, 104);
  EXPECT_EQ(d.num_reqs, 0);
}

TEST(CudaGraphDispatch, DecodeBatchAboveFullGraphsFallsBackToPiecewise) {
  // Full decode graphs stop at 256 tokens (max_num_seqs); piecewise graphs go up to 512.
  graph_dispatcher g(make_plan(cudagraph_mode::full_and_piecewise, 1, 256), 256);
  auto d = g.dispatch(200, 300, 0);
  EXPECT_EQ(d.mode, cudagraph_mode::piecewise);
  EXPECT_EQ(d.num_tokens, 304);
}

TEST(CudaGraphDispatch, BatchAboveLargestSizeRunsEagerWithRealCounts) {
  graph_dispatcher g(make_plan(cudagraph_mode::full_and_piecewise), 256);
  EXPECT_EQ(g.max_num_tokens(), 512);
  auto d = g.dispatch(7, 513, 0, 0, 0, 1);
  EXPECT_EQ(d.mode, cudagraph_mode::none);
  EXPECT_EQ(d.num_tokens, 513);
  EXPECT_EQ(d.num_reqs, 7);
  EXPECT_EQ(d.uniform_token_count, 0);
}

TEST(CudaGraphDispatch, ZeroTokensRunEager) {
  graph_dispatcher g(make_plan(cudagraph_mode::full_and_piecewise), 256);
  auto d = g.dispatch(0, 0, 0);
  EXPECT_EQ(d.mode, cudagraph_mode::none);
  EXPECT_EQ(d.num_tokens, 0);
}

TEST(CudaGraphDispatch, PiecewiseModeOnlyReturnsPiecewiseGraphs) {
  graph_dispatcher g(make_plan(cudagraph_mode::piecewise), 256);
  // The default ladder for 256 sequences: 1, 2, 4, then multiples of 8 below 256, then
  // multiples of 16 up to 512. A batch pads to the first size not below it.
  for (auto [n, padded] : std::vector<std::pair<int32_t, int32_t>>{
           {1, 1}, {3, 4}, {8, 8}, {200, 200}, {201, 208}, {257, 272}, {512, 512}}) {
    auto decode = g.dispatch(n > 256 ? 256 : n, n, n > 256 ? 0 : 1);
    EXPECT_EQ(decode.mode, cudagraph_mode::piecewise) << n;
    EXPECT_EQ(decode.num_tokens, padded) << n;
  }
}

TEST(CudaGraphDispatch, ModeNoneAlwaysRunsEager) {
  graph_dispatcher g(make_plan(cudagraph_mode::none), 256);
  EXPECT_EQ(g.max_num_tokens(), 0);
  EXPECT_EQ(g.dispatch(4, 4, 1).mode, cudagraph_mode::none);
}

TEST(CudaGraphDispatch, SpecDecodeBatchPadsToNextMultipleOfQ) {
  // docs/vllm-semantics.md §10 case 43's plan: FULL decode at 3,6,9,18,24 tokens; PIECEWISE
  // at 1,2,4,8,16,24.
  graph_dispatcher g(make_plan(cudagraph_mode::full_and_piecewise, 3, 8, {1, 2, 4, 8, 16, 24}), 8);
  auto four = g.dispatch(4, 12, uniform_token_count(4, 12, 3));
  EXPECT_EQ(four.mode, cudagraph_mode::full);
  EXPECT_EQ(four.num_tokens, 18);
  EXPECT_EQ(four.num_reqs, 6);
  auto two = g.dispatch(2, 6, uniform_token_count(2, 6, 3));
  EXPECT_EQ(two.mode, cudagraph_mode::full);
  EXPECT_EQ(two.num_tokens, 6);
  // Non-uniform batch of 7 tokens: piecewise graph of 8 tokens.
  auto mixed = g.dispatch(2, 7, uniform_token_count(2, 7, 3));
  EXPECT_EQ(mixed.mode, cudagraph_mode::piecewise);
  EXPECT_EQ(mixed.num_tokens, 8);
}

TEST(CudaGraphDispatch, FullModeBatchNeedsAGraphWithEnoughRequests) {
  // FULL mixed graphs at 4 tokens hold 4 requests; at 16 tokens 8 (max_num_seqs).
  graph_dispatcher g(make_plan(cudagraph_mode::full, 1, 8, {1, 4, 16}), 8);
  auto d = g.dispatch(3, 4, 0);
  EXPECT_EQ(d.mode, cudagraph_mode::full);
  EXPECT_EQ(d.num_tokens, 4);
  EXPECT_EQ(d.num_reqs, 4);
}

TEST(CudaGraphDispatch, DifferentUbatchCountRunsEager) {
  graph_dispatcher g(make_plan(cudagraph_mode::full_and_piecewise), 256);
  auto d = g.dispatch(4, 4, 1, 0, 0, 2);
  EXPECT_EQ(d.mode, cudagraph_mode::none);
  EXPECT_EQ(d.num_ubatches, 2);
}

TEST(CudaGraphDispatch, CandidatesPreferUniformThenBoundedThenFewerRequests) {
  // A hand-made plan with several FULL descriptors at one token count.
  cudagraph_plan plan;
  plan.mode = cudagraph_mode::full;
  batch_descriptor any{cudagraph_mode::full, 8, 0, 0, 0, 0, false, 1};
  batch_descriptor eight_reqs{cudagraph_mode::full, 8, 8, 0, 0, 0, false, 1};
  batch_descriptor four_reqs{cudagraph_mode::full, 8, 4, 0, 0, 0, false, 1};
  batch_descriptor bounded{cudagraph_mode::full, 8, 4, 0, 2, 0, false, 1};
  batch_descriptor uniform{cudagraph_mode::full, 8, 4, 2, 0, 0, false, 1};
  plan.full_graphs = {any, eight_reqs, four_reqs, bounded, uniform};
  graph_dispatcher g(plan, 8);
  EXPECT_EQ(g.dispatch(4, 8, 2, 0, 2), uniform);
  EXPECT_EQ(g.dispatch(4, 8, 0, 0, 2), bounded);
  EXPECT_EQ(g.dispatch(4, 8, 0, 0, 3), four_reqs);
  EXPECT_EQ(g.dispatch(6, 8, 0), eight_reqs);
}

TEST(CudaGraphCompatible, ExactDescriptorMatchesOnlyItsTokenCount) {
  batch_descriptor d{cudagraph_mode::full, 8, 2, 0, 0, 0, true, 1};
  EXPECT_TRUE(compatible(d, 2, 8, 0, 0, 0, 1));
  EXPECT_FALSE(compatible(d, 2, 7, 0, 0, 0, 1));
}

} // namespace
} // namespace kvactor
