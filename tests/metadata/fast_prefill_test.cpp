#include "actors/metadata/fast_prefill.hpp"

#include <gtest/gtest.h>

#include "actors/cudagraph/planner.hpp"

namespace kvactor {
namespace {

using ints = std::vector<int32_t>;

cudagraph_plan make_plan(cudagraph_mode mode, ints capture_sizes) {
  cudagraph_options opt;
  opt.requested = mode;
  opt.max_num_seqs = 8;
  opt.capture_sizes = std::move(capture_sizes);
  auto plan = plan_cudagraphs(opt);
  EXPECT_TRUE(plan) << plan.err().message;
  return plan ? *plan : cudagraph_plan{};
}

batch_descriptor piecewise_desc() {
  batch_descriptor d;
  d.mode = cudagraph_mode::piecewise;
  d.num_tokens = 16;
  return d;
}

struct fixture : ::testing::Test {
  graph_dispatcher dispatcher{make_plan(cudagraph_mode::full_and_piecewise, {1, 2, 4, 8, 16}), 8};
  fast_prefill_helper helper{32};
  ints indices{4, 9, 13};
  ints cu{0, 1, 3};
};

using FastPrefillPrepare = fixture;

TEST_F(FastPrefillPrepare, PadsWithTheLastIndexToTheDispatchedTokenCount) {
  // docs/vllm-semantics.md §10 case 58: 3 indices dispatch to the 4-token piecewise graph.
  auto r = helper.prepare(indices, 2, cu, true, piecewise_desc(), dispatcher);
  ASSERT_TRUE(r) << r.err().message;
  ASSERT_TRUE(r->has_value());
  const auto& md = **r;
  EXPECT_EQ(md.logits_indices_padded, (ints{4, 9, 13, 13}));
  EXPECT_EQ(md.num_logits_indices, 3);
  EXPECT_EQ(md.max_logits_per_req, 2);
  auto buf = helper.buffer();
  ASSERT_EQ(buf.size(), 32u);
  EXPECT_EQ(ints(buf.begin(), buf.begin() + 5), (ints{4, 9, 13, 13, 13}));
  EXPECT_EQ(buf.back(), 13);
}

TEST_F(FastPrefillPrepare, IsDisarmedWithoutPrefillUnderFullGraphsOrWithMicrobatches) {
  EXPECT_FALSE(helper.prepare(indices, 2, cu, false, piecewise_desc(), dispatcher)->has_value());
  auto full = piecewise_desc();
  full.mode = cudagraph_mode::full;
  EXPECT_FALSE(helper.prepare(indices, 2, cu, true, full, dispatcher)->has_value());
  auto dbo = piecewise_desc();
  dbo.num_ubatches = 2;
  EXPECT_FALSE(helper.prepare(indices, 2, cu, true, dbo, dispatcher)->has_value());
  // A disarmed step leaves the buffer alone.
  EXPECT_EQ(helper.buffer()[0], 0);
}

TEST_F(FastPrefillPrepare, WithoutGraphsThePaddedLengthIsTheIndexCount) {
  graph_dispatcher eager{make_plan(cudagraph_mode::none, {}), 8};
  auto r = helper.prepare(indices, 2, cu, true, batch_descriptor{}, eager);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)->logits_indices_padded, indices);
}

TEST_F(FastPrefillPrepare, PaddedLengthNeverExceedsTheBuffer) {
  fast_prefill_helper small{3};
  auto r = small.prepare(indices, 2, cu, true, piecewise_desc(), dispatcher);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)->logits_indices_padded, indices); // dispatch says 4, the buffer holds 3
}

TEST_F(FastPrefillPrepare, ShorterStepOverwritesTheStaleTail) {
  ASSERT_TRUE(helper.prepare(indices, 2, cu, true, piecewise_desc(), dispatcher));
  auto r = helper.prepare(ints{6}, 1, ints{0, 1}, true, piecewise_desc(), dispatcher);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)->logits_indices_padded, ints{6});
  EXPECT_EQ(ints(helper.buffer().begin(), helper.buffer().begin() + 4), (ints{6, 6, 6, 6}));
}

TEST_F(FastPrefillPrepare, RejectsEmptyOrOversizedIndicesAndBadCounts) {
  auto msg = [&](fast_prefill_helper& h, ints idx, int32_t reqs, ints cu_logits) {
    auto r = h.prepare(idx, reqs, cu_logits, true, piecewise_desc(), dispatcher);
    return r ? std::string{} : r.err().message;
  };
  EXPECT_NE(msg(helper, {}, 2, cu).find("logits_indices: empty"), std::string::npos);
  fast_prefill_helper tiny{2};
  EXPECT_NE(msg(tiny, indices, 2, cu)
                .find("logits_indices: 3 entries, more than "
                      "max_num_tokens 2"),
            std::string::npos);
  EXPECT_NE(msg(helper, indices, 0, ints{0}).find("num_reqs: 0"), std::string::npos);
  EXPECT_NE(msg(helper, indices, 2, ints{0, 3}).find("cu_num_logits: 2 entries"),
            std::string::npos);
  EXPECT_EQ(helper.buffer()[0], 0);
}

// The example batch of docs/vllm-semantics.md §5.8: three requests of 15, 5 and 8 tokens. Owns
// the slot mapping its metadata views; neither copyable nor movable, since a copy's view would
// still point at the original's vector.
struct fast_prefill_batch {
  std::vector<int64_t> slot_mapping = std::vector<int64_t>(28, -1);
  common_attention_metadata m;

  fast_prefill_batch() {
    m.num_reqs = 3;
    m.num_actual_tokens = 28;
    m.query_start_loc = {0, 15, 20, 28};
    m.seq_lens = {15, 25, 8};
    m.max_query_len = 15;
    m.max_seq_len = 25;
    m.slot_mapping = slot_mapping;
    m.logits_indices_padded = {14, 18, 19, 27};
    m.num_logits_indices = 4;
    m.max_logits_per_req = 2;
  }
  fast_prefill_batch(const fast_prefill_batch&) = delete;
  fast_prefill_batch& operator=(const fast_prefill_batch&) = delete;
};

TEST(FastPrefillRewrite, QueryShrinksToTheLogitsTokensOfEachRequest) {
  fast_prefill_batch b;
  auto r = rewrite_for_fast_prefill(b.m);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(r->query_start_loc, (ints{0, 1, 3, 4}));
  EXPECT_EQ(r->num_actual_tokens, 4);
  EXPECT_EQ(r->max_query_len, 2);
  EXPECT_EQ(r->seq_lens, (ints{15, 25, 8}));
  EXPECT_EQ(r->slot_mapping.size(), 28u);
  EXPECT_EQ(r->slot_mapping.data(), b.slot_mapping.data()); // still the same buffer
  EXPECT_EQ(r->num_logits_indices, 4);
  EXPECT_TRUE(validate(*r));
}

TEST(FastPrefillRewrite, RequestWithoutLogitsGetsAnEmptyQuery) {
  fast_prefill_batch b;
  b.m.logits_indices_padded = {14, 27, 27}; // padded by the last index
  b.m.num_logits_indices = 2;
  auto r = rewrite_for_fast_prefill(b.m);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->query_start_loc, (ints{0, 1, 1, 2}));
  EXPECT_EQ(r->max_query_len, 1);
}

TEST(FastPrefillRewrite, AllDecodeBatchIsUnchanged) {
  std::vector<int64_t> slots{3, 4};
  common_attention_metadata m;
  m.num_reqs = 2;
  m.num_actual_tokens = 2;
  m.query_start_loc = {0, 1, 2};
  m.seq_lens = {5, 9};
  m.max_query_len = 1;
  m.slot_mapping = slots;
  m.logits_indices_padded = {0, 1};
  m.num_logits_indices = 2;
  auto r = rewrite_for_fast_prefill(m);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, m);
  EXPECT_EQ(r->slot_mapping.data(), slots.data());
}

TEST(FastPrefillRewrite, RejectsUnarmedMetadataAndIndicesOutsideTheBatch) {
  {
    fast_prefill_batch b;
    b.m.num_logits_indices = 0;
    auto r = rewrite_for_fast_prefill(b.m);
    ASSERT_FALSE(r);
    EXPECT_NE(r.err().message.find("not armed"), std::string::npos);
  }
  {
    fast_prefill_batch b;
    b.m.logits_indices_padded[2] = 28;
    auto o = rewrite_for_fast_prefill(b.m);
    ASSERT_FALSE(o);
    EXPECT_NE(o.err().message.find("logits_indices_padded[2]: 28"), std::string::npos);
  }
  {
    fast_prefill_batch b;
    b.m.seq_lens.pop_back();
    EXPECT_FALSE(rewrite_for_fast_prefill(b.m));
  }
}

} // namespace
} // namespace kvactor
