// How a rank splits a step among its builders and describes the batch to the graph manager.
#include <gtest/gtest.h>

#include "actors/rank/step_slicing.hpp"

using namespace kvactor;

namespace {

// A batch of requests scheduling `counts` tokens each.
step_batch batch_of(const std::vector<int32_t>& counts) {
  step_batch b;
  b.query_start_loc = {0};
  for (size_t r = 0; r < counts.size(); ++r) {
    b.request_ids.push_back(r + 1);
    for (int32_t t = 0; t < counts[r]; ++t)
      b.token_ids.push_back(7);
    b.query_start_loc.push_back(b.query_start_loc.back() + counts[r]);
    b.max_query_len = std::max(b.max_query_len, counts[r]);
  }
  return b;
}

} // namespace

TEST(StepSlicing, OneUbatchCoversTheWholeBatch) {
  auto work = slice_step(batch_of({3, 1, 1}), 9, 1, 2);
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0], (ubatch_work{9, 0, 0, 5, 0, 3}));
}

TEST(StepSlicing, TwoUbatchesSplitTheTokensInOrderWhenTwoBuildersExist) {
  auto work = slice_step(batch_of({1, 1, 1, 1}), 4, 2, 2);
  ASSERT_EQ(work.size(), 2u);
  EXPECT_EQ(work[0].ubatch, 0);
  EXPECT_EQ(work[1].ubatch, 1);
  EXPECT_EQ(work[0].token_start, 0);
  EXPECT_EQ(work[0].token_end, work[1].token_start);
  EXPECT_EQ(work[1].token_end, 4);
  EXPECT_EQ(work[0].req_start, 0);
  EXPECT_EQ(work[1].req_end, 4);
  EXPECT_EQ(work[0].seq, 4u);
  EXPECT_EQ(work[1].seq, 4u);
}

TEST(StepSlicing, StaysOneUbatchWithOneBuilderOrOneToken) {
  EXPECT_EQ(slice_step(batch_of({1, 1, 1, 1}), 0, 2, 1).size(), 1u) << "one builder";
  EXPECT_EQ(slice_step(batch_of({1}), 0, 2, 2).size(), 1u) << "one token cannot split";
}

TEST(StepSlicing, AUniformDecodeBatchHasOneTokenPerRequest) {
  EXPECT_EQ(uniform_decode(batch_of({1, 1, 1})), 1);
  EXPECT_EQ(uniform_decode(batch_of({1, 2})), 0);
  EXPECT_EQ(uniform_decode(batch_of({})), 0) << "an empty batch decodes nothing";
}

TEST(StepSlicing, AnEagerStepDescribesTheWholeBatchUnpadded) {
  auto d = eager_step(batch_of({3, 1}));
  EXPECT_EQ(d.mode, cudagraph_mode::none);
  EXPECT_EQ(d.num_tokens, 4);
  EXPECT_EQ(d.num_reqs, 2);
  EXPECT_EQ(d.num_ubatches, 1);
}
