// docs/vllm-semantics.md §8.2: ranks agree on one padded size (or all eager, or nothing to run).
#include "actors/cudagraph/padding_agreement.hpp"

#include <gtest/gtest.h>

#include "actors/cudagraph/planner.hpp"

namespace kvactor {
namespace {

graph_dispatcher dispatcher() {
  cudagraph_options opt;
  opt.requested = cudagraph_mode::full_and_piecewise;
  opt.max_num_seqs = 256;
  auto plan = plan_cudagraphs(opt);
  EXPECT_TRUE(plan) << plan.err().message;
  return graph_dispatcher(plan ? *plan : cudagraph_plan{}, 256);
}

padding_row decode(int32_t n) {
  return {n, cudagraph_mode::full, 1, 1, false, n, true};
}

TEST(PaddingAgreement, AllRanksWithoutTokensSkipTheStep) {
  auto a = agree_padding({{}, {}}, 0, dispatcher(), 64);
  EXPECT_TRUE(a.skip);
}

TEST(PaddingAgreement, DecodeRanksPadToTheGraphOfTheLargestBatch) {
  const auto d = dispatcher();
  const std::vector<padding_row> rows{decode(3), decode(5)};
  auto a0 = agree_padding(rows, 0, d, 1 << 30);
  auto a1 = agree_padding(rows, 1, d, 1 << 30);
  EXPECT_EQ(a0.synced_tokens, 5);
  EXPECT_EQ(a0.own.mode, cudagraph_mode::full);
  EXPECT_EQ(a0.padded_tokens, 8);
  EXPECT_EQ(a1.padded_tokens, a0.padded_tokens) << "every rank replays the same size";
  EXPECT_EQ(a0.uniform_token_count, 1);
}

TEST(PaddingAgreement, OneEagerRankMakesEveryRankEagerWithItsOwnTokens) {
  auto rows = std::vector<padding_row>{decode(3), decode(5)};
  rows[1].mode = cudagraph_mode::none;
  auto a = agree_padding(rows, 0, dispatcher(), 1 << 30);
  EXPECT_TRUE(a.eager);
  EXPECT_EQ(a.padded_tokens, 3);
}

TEST(PaddingAgreement, DifferentUniformCountsMeanNoUniformGraph) {
  auto rows = std::vector<padding_row>{decode(4), {12, cudagraph_mode::piecewise, 3, 3, false, 4}};
  auto a = agree_padding(rows, 0, dispatcher(), 1 << 30);
  EXPECT_EQ(a.uniform_token_count, 0);
  EXPECT_EQ(a.own.mode, cudagraph_mode::piecewise) << "the minimum mode";
  EXPECT_EQ(a.synced_tokens, 12);
  EXPECT_EQ(a.padded_tokens, 16);
}

TEST(PaddingAgreement, MicrobatchingNeedsEveryRankAndTheSmallestPastTheThreshold) {
  std::vector<padding_row> rows{{300, cudagraph_mode::piecewise, 0, -1, true, 10},
                                {500, cudagraph_mode::piecewise, 0, -1, true, 12}};
  auto a = agree_padding(rows, 0, dispatcher(), 256);
  EXPECT_TRUE(a.microbatch);
  EXPECT_EQ(a.synced_tokens, 500);
  rows[1].allow_ubatching = false;
  EXPECT_FALSE(agree_padding(rows, 0, dispatcher(), 256).microbatch);
}

TEST(PaddingAgreement, ADeadRankNeverVetoes) {
  auto rows = std::vector<padding_row>{decode(3), {0, cudagraph_mode::none, 0, -1, false, 0}};
  rows[1].alive = false;
  auto a = agree_padding(rows, 0, dispatcher(), 1 << 30);
  EXPECT_FALSE(a.eager);
  EXPECT_EQ(a.padded_tokens, 4);
}

TEST(PaddingAgreement, RowsTravelAsSevenValuesAndComeBackWhole) {
  const padding_row a{37, cudagraph_mode::piecewise, 0, -1, true, 5, true};
  const padding_row b{0, cudagraph_mode::none, 0, 9, false, 0, false};
  auto table = encode_row(a);
  ASSERT_EQ(table.size(), 7u);
  const auto more = encode_row(b);
  table.insert(table.end(), more.begin(), more.end());
  const auto rows = decode_rows(table);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(encode_row(rows[0]), encode_row(a));
  EXPECT_EQ(encode_row(rows[1]), encode_row(b));
}

TEST(PaddingAgreement, WithoutADispatcherTheGraphCaseAsksForARedispatchToTheLargestBatch) {
  auto a = agree_padding_rows({decode(3), decode(7)}, 0, 1 << 30);
  EXPECT_TRUE(a.redispatch);
  EXPECT_EQ(a.synced_tokens, 7);
  EXPECT_EQ(a.own.num_tokens, 0) << "left to the caller's dispatcher";
  // The eager and skip cases need no dispatcher: no re-dispatch.
  auto eager = decode(7);
  eager.mode = cudagraph_mode::none;
  EXPECT_FALSE(agree_padding_rows({decode(3), eager}, 0, 1 << 30).redispatch);
  EXPECT_FALSE(agree_padding_rows({{}, {}}, 0, 1 << 30).redispatch);
}

} // namespace
} // namespace kvactor
