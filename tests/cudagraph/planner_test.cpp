#include "actors/cudagraph/planner.hpp"

#include <gtest/gtest.h>

namespace kvactor {
namespace {

using sizes = std::vector<int32_t>;

cudagraph_options options(cudagraph_mode mode, graph_support support) {
  cudagraph_options opt;
  opt.requested = mode;
  opt.support = graph_support_info{}.narrow(support, "test_attn");
  return opt;
}

sizes tokens_of(const std::vector<batch_descriptor>& xs) {
  sizes out;
  for (const auto& d : xs)
    out.push_back(d.num_tokens);
  return out;
}

sizes reqs_of(const std::vector<batch_descriptor>& xs) {
  sizes out;
  for (const auto& d : xs)
    out.push_back(d.num_reqs);
  return out;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(CudaGraphPlan, SpecDecodeQ3PlansFullDecodeGraphsAtMultiplesOf3AndPiecewiseAtEverySize) {
  // docs/vllm-semantics.md §10 case 43.
  auto opt = options(cudagraph_mode::full_and_piecewise, graph_support::always);
  opt.capture_sizes = {1, 2, 4, 8, 16, 24};
  opt.uniform_decode_query_len = 3;
  opt.max_num_seqs = 8;
  auto plan = plan_cudagraphs(opt);
  ASSERT_TRUE(plan) << plan.err().message;
  EXPECT_EQ(plan->mode, cudagraph_mode::full_and_piecewise);
  EXPECT_TRUE(plan->notes.empty());
  EXPECT_EQ(plan->capture_sizes, (sizes{1, 2, 4, 8, 16, 24}));
  // Capture order: largest first.
  EXPECT_EQ(tokens_of(plan->full_graphs), (sizes{24, 18, 9, 6, 3}));
  EXPECT_EQ(reqs_of(plan->full_graphs), (sizes{8, 6, 3, 2, 1}));
  for (const auto& d : plan->full_graphs) {
    EXPECT_EQ(d.mode, cudagraph_mode::full);
    EXPECT_EQ(d.uniform_token_count, 3);
  }
  EXPECT_EQ(tokens_of(plan->piecewise_graphs), (sizes{24, 16, 8, 4, 2, 1}));
  for (const auto& d : plan->piecewise_graphs) {
    EXPECT_EQ(d.mode, cudagraph_mode::piecewise);
    EXPECT_EQ(d.num_reqs, 0);
    EXPECT_EQ(d.uniform_token_count, 0);
  }
}

TEST(CudaGraphPlan, DefaultFullDecodeGraphsStopAtMaxNumSeqsWhilePiecewiseCoverEverySize) {
  auto plan = plan_cudagraphs(options(cudagraph_mode::full_and_piecewise, graph_support::always));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->capture_sizes.size(), 51u);
  // A single-token decode graph above 256 tokens would need more than max_num_seqs requests.
  ASSERT_EQ(plan->full_graphs.size(), 35u);
  EXPECT_EQ(plan->full_graphs.front().num_tokens, 256);
  EXPECT_EQ(plan->full_graphs.front().num_reqs, 256);
  EXPECT_EQ(plan->full_graphs.back().num_tokens, 1);
  ASSERT_EQ(plan->piecewise_graphs.size(), 51u);
  EXPECT_EQ(plan->piecewise_graphs.front().num_tokens, 512);
}

TEST(CudaGraphPlan, UniformBatchSupportKeepsFullAndPiecewise) {
  auto plan =
      plan_cudagraphs(options(cudagraph_mode::full_and_piecewise, graph_support::uniform_batch));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::full_and_piecewise);
  EXPECT_EQ(mixed_mode(plan->mode), cudagraph_mode::piecewise);
  EXPECT_TRUE(plan->notes.empty());
}

TEST(CudaGraphPlan, UniformBatchSupportTurnsFullIntoFullAndPiecewiseWhenAttentionIsSplit) {
  auto plan = plan_cudagraphs(options(cudagraph_mode::full, graph_support::uniform_batch));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::full_and_piecewise);
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_EQ(plan->notes[0],
            "full -> full_and_piecewise: backend 'test_attn' supports uniform_batch, not always");
}

TEST(CudaGraphPlan, UniformBatchSupportTurnsFullIntoFullDecodeOnlyWithoutAttentionSplitting) {
  auto opt = options(cudagraph_mode::full, graph_support::uniform_batch);
  opt.attention_splitting = false;
  auto plan = plan_cudagraphs(opt);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::full_decode_only);
  EXPECT_FALSE(plan->full_graphs.empty());
  EXPECT_TRUE(plan->piecewise_graphs.empty());
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_TRUE(contains(plan->notes[0], "full -> full_decode_only"));
}

TEST(CudaGraphPlan, NeverSupportWithFullIsUnsupportedNamingBackendAndSuggestingPiecewise) {
  auto plan = plan_cudagraphs(options(cudagraph_mode::full, graph_support::never));
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.err().code, errc::unsupported);
  EXPECT_TRUE(contains(plan.err().message, "test_attn"));
  EXPECT_TRUE(contains(plan.err().message, "piecewise"));
}

TEST(CudaGraphPlan, NeverSupportTurnsFullAndPiecewiseIntoPiecewise) {
  auto plan = plan_cudagraphs(options(cudagraph_mode::full_and_piecewise, graph_support::never));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::piecewise);
  EXPECT_TRUE(plan->full_graphs.empty());
  EXPECT_EQ(plan->piecewise_graphs.size(), 51u);
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_TRUE(contains(plan->notes[0], "full_and_piecewise -> piecewise"));
  EXPECT_TRUE(contains(plan->notes[0], "test_attn"));
}

TEST(CudaGraphPlan, NeverSupportTurnsFullAndPiecewiseIntoNoneWithoutAttentionSplitting) {
  auto opt = options(cudagraph_mode::full_and_piecewise, graph_support::never);
  opt.attention_splitting = false;
  auto plan = plan_cudagraphs(opt);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::none);
  EXPECT_TRUE(plan->full_graphs.empty());
  EXPECT_TRUE(plan->piecewise_graphs.empty());
  EXPECT_EQ(plan->notes.size(), 1u);
}

TEST(CudaGraphPlan, SingleTokenDecodeSupportWithQ2FallsBackToPiecewise) {
  auto opt =
      options(cudagraph_mode::full_and_piecewise, graph_support::uniform_single_token_decode);
  opt.uniform_decode_query_len = 2;
  auto plan = plan_cudagraphs(opt);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::piecewise);
  EXPECT_TRUE(plan->full_graphs.empty());
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_TRUE(contains(plan->notes[0], "uniform_single_token_decode"));
}

TEST(CudaGraphPlan, SingleTokenDecodeSupportWithQ1KeepsFullDecodeGraphs) {
  auto plan = plan_cudagraphs(
      options(cudagraph_mode::full_and_piecewise, graph_support::uniform_single_token_decode));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::full_and_piecewise);
}

TEST(CudaGraphPlan, SingleTokenDecodeSupportWithQ2AndModeFullNotesBothSteps) {
  auto opt = options(cudagraph_mode::full, graph_support::uniform_single_token_decode);
  opt.uniform_decode_query_len = 2;
  auto plan = plan_cudagraphs(opt);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::piecewise);
  ASSERT_EQ(plan->notes.size(), 2u);
  EXPECT_TRUE(contains(plan->notes[0], "full -> full_and_piecewise"));
  EXPECT_TRUE(contains(plan->notes[1], "full_and_piecewise -> piecewise"));
}

TEST(CudaGraphPlan, NoneStaysNoneWithoutSizesOrGraphs) {
  auto plan = plan_cudagraphs(options(cudagraph_mode::none, graph_support::always));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::none);
  EXPECT_TRUE(plan->capture_sizes.empty());
  EXPECT_TRUE(plan->full_graphs.empty());
  EXPECT_TRUE(plan->piecewise_graphs.empty());
  EXPECT_TRUE(plan->notes.empty());
}

TEST(CudaGraphPlan, PiecewiseModePlansOnlyPiecewiseGraphs) {
  auto plan = plan_cudagraphs(options(cudagraph_mode::piecewise, graph_support::always));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::piecewise);
  EXPECT_TRUE(plan->full_graphs.empty());
  EXPECT_EQ(plan->piecewise_graphs.size(), 51u);
}

TEST(CudaGraphPlan, FullModeWithAlwaysSupportPlansFullMixedGraphsWithPaddedRequests) {
  auto opt = options(cudagraph_mode::full, graph_support::always);
  opt.capture_sizes = {1, 4, 16, 64};
  opt.max_num_seqs = 8;
  auto plan = plan_cudagraphs(opt);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::full);
  EXPECT_EQ(tokens_of(plan->full_graphs), (sizes{64, 16, 4, 1}));
  EXPECT_EQ(reqs_of(plan->full_graphs), (sizes{8, 8, 4, 1}));
  for (const auto& d : plan->full_graphs)
    EXPECT_EQ(d.uniform_token_count, 0);
  EXPECT_TRUE(plan->piecewise_graphs.empty());
}

TEST(CudaGraphPlan, MambaWithMoreSeqsThanBlocksIsAnErrorNamingMaxNumSeqs) {
  auto opt = options(cudagraph_mode::full_and_piecewise, graph_support::always);
  opt.has_mamba = true;
  opt.max_num_seqs = 256;
  opt.num_blocks = 100;
  auto plan = plan_cudagraphs(opt);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.err().code, errc::invalid_argument);
  EXPECT_TRUE(contains(plan.err().message, "max_num_seqs (256)"));
  EXPECT_TRUE(contains(plan.err().message, "(100)"));
}

TEST(CudaGraphPlan, MambaCheckPassesWithEnoughBlocksAndIgnoresPiecewiseMode) {
  auto opt = options(cudagraph_mode::full_and_piecewise, graph_support::always);
  opt.has_mamba = true;
  opt.num_blocks = 256;
  EXPECT_TRUE(plan_cudagraphs(opt));
  opt.num_blocks = 100;
  opt.requested = cudagraph_mode::piecewise;
  EXPECT_TRUE(plan_cudagraphs(opt));
}

TEST(CudaGraphPlan, InvalidUserCaptureSizeIsReportedEvenForModeNone) {
  auto opt = options(cudagraph_mode::none, graph_support::always);
  opt.capture_sizes = {0};
  auto plan = plan_cudagraphs(opt);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.err().code, errc::invalid_argument);
}

TEST(CudaGraphPlan, NonPositiveMaxNumSeqsIsAnInvalidArgument) {
  auto opt = options(cudagraph_mode::full_and_piecewise, graph_support::always);
  opt.max_num_seqs = 0;
  auto plan = plan_cudagraphs(opt);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.err().code, errc::invalid_argument);
  EXPECT_TRUE(contains(plan.err().message, "--max-num-seqs"));
}

TEST(CudaGraphPlan, UserSizesAllAboveTheBudgetResolveToNoneWithANote) {
  auto opt = options(cudagraph_mode::piecewise, graph_support::always);
  opt.capture_sizes = {4096};
  auto plan = plan_cudagraphs(opt);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->mode, cudagraph_mode::none);
  EXPECT_TRUE(plan->piecewise_graphs.empty());
  EXPECT_EQ(plan->notes.size(), 1u);
}

} // namespace
} // namespace kvactor
