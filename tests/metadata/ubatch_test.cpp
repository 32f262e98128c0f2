#include "actors/metadata/ubatch.hpp"

#include <gtest/gtest.h>

#include "views.hpp"

namespace kvactor {
namespace {

using ints = std::vector<int32_t>;
using longs = std::vector<int64_t>;
using test::vec;

TEST(UbatchSlices, RequestsStraddlingASplitAppearInBothSlices) {
  // docs/vllm-semantics.md §10 case 51: scheduled [3,5,4] (12 tokens), 2 ubatches.
  auto s = make_ubatch_slices({3, 5, 4}, 12, 3, 2);
  ASSERT_TRUE(s) << s.err().message;
  EXPECT_EQ(s->slices, (std::vector<ubatch_slice>{{0, 6, 0, 2}, {6, 12, 1, 3}}));
  EXPECT_EQ(s->padded, s->slices);
}

TEST(UbatchSlices, SplitAtARequestBoundaryDoesNotShareRequests) {
  auto s = make_ubatch_slices({3, 3, 4, 2}, 12, 4, 2);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->slices, (std::vector<ubatch_slice>{{0, 6, 0, 2}, {6, 12, 2, 4}}));
}

TEST(UbatchSlices, PaddedVariantStretchesOnlyTheLastSlice) {
  // 10 real tokens padded to 16 and 3 requests padded to 4: splits at 8.
  auto s = make_ubatch_slices({4, 4, 2}, 16, 4, 2);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->slices, (std::vector<ubatch_slice>{{0, 8, 0, 2}, {8, 10, 2, 3}}));
  EXPECT_EQ(s->padded, (std::vector<ubatch_slice>{{0, 8, 0, 2}, {8, 16, 2, 4}}));
}

TEST(UbatchSlices, ThreeUbatchesAndAnExplicitSplitPoint) {
  auto s = make_ubatch_slices({9}, 9, 1, 3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->slices, (std::vector<ubatch_slice>{{0, 3, 0, 1}, {3, 6, 0, 1}, {6, 9, 0, 1}}));
  auto p = make_ubatch_slices({2, 8}, 10, 2, 2, 4);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->slices, (std::vector<ubatch_slice>{{0, 4, 0, 2}, {4, 10, 1, 2}}));
}

TEST(UbatchSlices, RejectsBadInputsAndAnEmptyLastUbatch) {
  auto msg = [](ints sched, int32_t tp, int32_t rp, int32_t k) {
    auto s = make_ubatch_slices(sched, tp, rp, k);
    return s ? std::string{} : s.err().message;
  };
  EXPECT_NE(msg({3, 5}, 8, 2, 0).find("k: 0"), std::string::npos);
  EXPECT_NE(msg({3, -5}, 8, 2, 2).find("num_scheduled_tokens[1]: -5"), std::string::npos);
  EXPECT_NE(msg({3, 5}, 7, 2, 2).find("num_tokens_padded: 7"), std::string::npos);
  EXPECT_NE(msg({3, 5}, 8, 1, 2).find("num_reqs_padded: 1"), std::string::npos);
  EXPECT_NE(msg({3, 2}, 16, 2, 2).find("is_last_ubatch_empty"), std::string::npos);
  EXPECT_NE(msg({}, 0, 0, 1).find("is_last_ubatch_empty"), std::string::npos);
}

TEST(UbatchSlices, LastUbatchIsEmptyWhenTheRealTokensFitTheOthers) {
  // docs/vllm-semantics.md §10 case 52.
  EXPECT_TRUE(is_last_ubatch_empty(5, 16, 2));
  EXPECT_FALSE(is_last_ubatch_empty(9, 16, 2));
  EXPECT_TRUE(is_last_ubatch_empty(8, 16, 2));
  EXPECT_FALSE(is_last_ubatch_empty(11, 16, 3));
}

// The case-51 batch: queries [3,5,4], seq_lens [13,25,4], two block-table columns. Owns the
// arrays its metadata views; neither copyable nor movable, since a copy's views would still point
// at the original's vectors.
struct case51 {
  ints block_table{10, 11, 20, 21, 30, 31};
  longs slot_mapping;
  longs positions;
  common_attention_metadata m;

  case51() {
    for (int64_t t = 0; t < 12; ++t) {
      slot_mapping.push_back(100 + t);
      positions.push_back(t);
    }
    m.num_reqs = 3;
    m.num_actual_tokens = 12;
    m.query_start_loc = {0, 3, 8, 12};
    m.seq_lens = {13, 25, 4};
    m.max_query_len = 5;
    m.max_seq_len = 25;
    m.block_table_width = 2;
    m.block_table = block_table;
    m.slot_mapping = slot_mapping;
    m.positions = positions;
    m.is_prefilling = {false, true, true};
    m.causal = false;
  }
  case51(const case51&) = delete;
  case51& operator=(const case51&) = delete;
};

TEST(SplitMetadata, SplitRequestIsShortenedInTheFirstAndRebasedInTheSecond) {
  case51 c;
  const auto& m = c.m;
  auto s = make_ubatch_slices({3, 5, 4}, 12, 3, 2);
  ASSERT_TRUE(s);
  auto parts = split_metadata(s->slices, m);
  ASSERT_TRUE(parts) << parts.err().message;
  ASSERT_EQ(parts->size(), 2u);
  const auto& a = (*parts)[0];
  // Request 1 has 3 of its 5 tokens here; its seq_len drops by the 2 it leaves.
  EXPECT_EQ(a.query_start_loc, (ints{0, 3, 6}));
  EXPECT_EQ(a.seq_lens, (ints{13, 23}));
  EXPECT_EQ(a.num_reqs, 2);
  EXPECT_EQ(a.num_actual_tokens, 6);
  EXPECT_EQ(a.max_query_len, 3);
  EXPECT_EQ(a.max_seq_len, 25); // never below the original bound
  EXPECT_EQ(vec(a.block_table), (ints{10, 11, 20, 21}));
  EXPECT_EQ(vec(a.slot_mapping), (longs{100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(vec(a.positions), (longs{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(a.is_prefilling, (std::vector<bool>{false, true}));
  EXPECT_FALSE(a.causal);
  const auto& b = (*parts)[1];
  // Request 1 continues with its last 2 tokens and keeps its full seq_len.
  EXPECT_EQ(b.query_start_loc, (ints{0, 2, 6}));
  EXPECT_EQ(b.seq_lens, (ints{25, 4}));
  EXPECT_EQ(b.num_actual_tokens, 6);
  EXPECT_EQ(b.max_query_len, 4);
  EXPECT_EQ(vec(b.block_table), (ints{20, 21, 30, 31}));
  EXPECT_EQ(vec(b.slot_mapping), (longs{106, 107, 108, 109, 110, 111}));
  EXPECT_EQ(vec(b.positions), (longs{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(b.is_prefilling, (std::vector<bool>{true, true}));
  EXPECT_TRUE(validate(a));
  EXPECT_TRUE(validate(b));
  // The input is never modified.
  case51 fresh;
  EXPECT_EQ(m, fresh.m);
}

TEST(SplitMetadata, SlicesViewTheInputsBuffers) {
  // Each slice's views are sub-spans of the input's: rows [req_start, req_end), tokens
  // [token_start, token_end); nothing is copied.
  case51 c;
  auto s = make_ubatch_slices({3, 5, 4}, 12, 3, 2);
  ASSERT_TRUE(s);
  auto parts = split_metadata(s->slices, c.m);
  ASSERT_TRUE(parts) << parts.err().message;
  const auto& a = (*parts)[0];
  const auto& b = (*parts)[1];
  EXPECT_EQ(a.block_table.data(), c.block_table.data());
  EXPECT_EQ(a.slot_mapping.data(), c.slot_mapping.data());
  EXPECT_EQ(a.positions.data(), c.positions.data());
  EXPECT_EQ(b.block_table.data(), c.block_table.data() + 2); // from request 1's row
  EXPECT_EQ(b.block_table.size(), 4u);
  EXPECT_EQ(b.slot_mapping.data(), c.slot_mapping.data() + 6); // from token 6
  EXPECT_EQ(b.slot_mapping.size(), 6u);
  EXPECT_EQ(b.positions.data(), c.positions.data() + 6);
  EXPECT_EQ(b.positions.size(), 6u);
}

TEST(SplitMetadata, PaddedLastSliceCoversPaddingTokensAndRequests) {
  // 10 real tokens in 3 requests, padded to 16 tokens and 4 requests (a FULL graph batch).
  longs slots(16, -1);
  common_attention_metadata m;
  m.num_reqs = 4;
  m.num_actual_tokens = 16;
  m.query_start_loc = {0, 4, 8, 10, 10};
  m.seq_lens = {4, 8, 2, 0};
  m.max_query_len = 4;
  m.max_seq_len = 8;
  m.slot_mapping = slots;
  auto s = make_ubatch_slices({4, 4, 2}, 16, 4, 2);
  ASSERT_TRUE(s);
  auto parts = split_metadata(s->padded, m);
  ASSERT_TRUE(parts) << parts.err().message;
  const auto& b = (*parts)[1];
  EXPECT_EQ(b.num_reqs, 2);
  EXPECT_EQ(b.num_actual_tokens, 8);
  EXPECT_EQ(b.query_start_loc, (ints{0, 2, 2}));
  EXPECT_EQ(b.seq_lens, (ints{2, 0}));
  EXPECT_EQ(b.slot_mapping.size(), 8u);
  EXPECT_EQ(b.slot_mapping.data(), slots.data() + 8);
  EXPECT_TRUE(b.positions.empty()); // not given, not invented
}

TEST(SplitMetadata, DummyRunKeepsTheOriginalMaxQueryLen) {
  longs slots(4, -1);
  common_attention_metadata m;
  m.num_reqs = 2;
  m.num_actual_tokens = 4;
  m.query_start_loc = {0, 0, 0}; // a dummy run: all zeros
  m.seq_lens = {0, 0};
  m.max_query_len = 2;
  m.max_seq_len = 16;
  m.slot_mapping = slots;
  auto parts = split_metadata({{0, 2, 0, 1}, {2, 4, 1, 2}}, m);
  ASSERT_TRUE(parts) << parts.err().message;
  EXPECT_EQ((*parts)[0].max_query_len, 2);
  EXPECT_EQ((*parts)[1].max_seq_len, 16);
}

TEST(SplitMetadata, RejectsEmptyOrOutOfRangeSlices) {
  case51 c;
  auto msg = [&](std::vector<ubatch_slice> slices) {
    auto r = split_metadata(slices, c.m);
    return r ? std::string{} : r.err().message;
  };
  EXPECT_NE(msg({{0, 13, 0, 3}}).find("slices[0]: tokens [0, 13)"), std::string::npos);
  EXPECT_NE(msg({{0, 6, 0, 2}, {6, 6, 1, 3}}).find("slices[1]: tokens [6, 6)"), std::string::npos);
  EXPECT_NE(msg({{0, 6, 0, 4}}).find("requests [0, 4)"), std::string::npos);
  EXPECT_NE(msg({{2, 6, 1, 2}}).find("token 2 lies before request 1"), std::string::npos);
}

TEST(SplitMetadata, RejectsInvalidMetadataAndArmedFastPrefill) {
  {
    case51 c;
    c.m.seq_lens.pop_back();
    auto r = split_metadata({{0, 12, 0, 3}}, c.m);
    ASSERT_FALSE(r);
    EXPECT_NE(r.err().message.find("seq_lens"), std::string::npos);
  }
  {
    case51 c;
    c.m.logits_indices_padded = {2, 7, 11};
    c.m.num_logits_indices = 3;
    auto f = split_metadata({{0, 12, 0, 3}}, c.m);
    ASSERT_FALSE(f);
    EXPECT_NE(f.err().message.find("num_logits_indices: 3"), std::string::npos);
  }
}

} // namespace
} // namespace kvactor
