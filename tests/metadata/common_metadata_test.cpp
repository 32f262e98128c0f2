#include "actors/metadata/common_metadata.hpp"

#include <gtest/gtest.h>

#include "views.hpp"

namespace kvactor {
namespace {

using test::vec;

// A valid batch with the given query lengths; seq_len = 10 + query, one block-table entry. Owns
// the arrays its metadata views (the persistent buffers of the real code); neither copyable nor
// movable, since a copy's views would still point at the original's vectors.
struct batch {
  std::vector<int32_t> block_table;
  std::vector<int64_t> slot_mapping;
  common_attention_metadata m;

  explicit batch(std::vector<int32_t> query_lens) {
    m.num_reqs = static_cast<int32_t>(query_lens.size());
    m.query_start_loc = {0};
    for (auto q : query_lens) {
      m.query_start_loc.push_back(m.query_start_loc.back() + q);
      m.seq_lens.push_back(10 + q);
      m.max_query_len = std::max(m.max_query_len, q);
    }
    m.num_actual_tokens = m.query_start_loc.back();
    m.block_table_width = 1;
    block_table.assign(query_lens.size(), 0);
    slot_mapping.assign(static_cast<size_t>(m.num_actual_tokens), -1);
    rebind();
  }
  batch(const batch&) = delete;
  batch& operator=(const batch&) = delete;

  /// Points the views at the vectors again; call after resizing or reassigning one.
  void rebind() {
    m.block_table = block_table;
    m.slot_mapping = slot_mapping;
  }
};

TEST(CommonMetadata, ValidBatchPassesValidation) {
  EXPECT_TRUE(validate(batch({1, 1, 5}).m));
  EXPECT_TRUE(validate(batch({}).m));
}

TEST(CommonMetadata, QueryLenAndBlockTableRowReadTheBuffers) {
  batch b({2, 3});
  b.m.block_table_width = 2;
  b.block_table = {7, 8, 9, 10};
  b.rebind();
  EXPECT_EQ(b.m.query_len(1), 3);
  auto row = b.m.block_table_row(1);
  EXPECT_EQ(vec(row), (std::vector<int32_t>{9, 10}));
  EXPECT_EQ(row.data(), b.block_table.data() + 2); // a view of the buffer, not a copy
}

TEST(CommonMetadata, ValidationNamesTheMisshapenField) {
  {
    batch b({2, 3});
    b.m.query_start_loc.pop_back();
    auto s = validate(b.m);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.err().code, errc::invalid_argument);
    EXPECT_NE(s.err().message.find("query_start_loc"), std::string::npos) << s.err().message;
  }
  {
    batch b({2, 3});
    b.m.query_start_loc = {0, 4, 3};
    ASSERT_FALSE(validate(b.m));
    EXPECT_NE(validate(b.m).err().message.find("query_start_loc[2]: 3"), std::string::npos);
  }
  {
    batch b({2, 3});
    b.slot_mapping.resize(4);
    b.rebind();
    EXPECT_NE(validate(b.m).err().message.find("slot_mapping: 4"), std::string::npos);
  }
  {
    batch b({2, 3});
    b.block_table.push_back(1);
    b.rebind();
    EXPECT_NE(validate(b.m).err().message.find("block_table: 3"), std::string::npos);
  }
  {
    batch b({2, 3});
    b.m.seq_lens[1] = -1;
    EXPECT_NE(validate(b.m).err().message.find("seq_lens[1]: -1"), std::string::npos);
  }
  {
    batch b({2, 3});
    b.m.is_prefilling = {true};
    EXPECT_NE(validate(b.m).err().message.find("is_prefilling"), std::string::npos);
  }
  {
    batch b({2, 3});
    b.m.num_logits_indices = 2;
    EXPECT_NE(validate(b.m).err().message.find("num_logits_indices: 2"), std::string::npos);
  }
}

TEST(CommonMetadata, ShortPositionsAreRejectedAndEmptyPositionsAllowed) {
  batch b({2, 3});
  std::vector<int64_t> positions{0, 1, 2, 3};
  b.m.positions = positions;
  EXPECT_NE(validate(b.m).err().message.find("positions: 4"), std::string::npos);
  positions.push_back(4);
  b.m.positions = positions;
  EXPECT_TRUE(validate(b.m));
  b.m.positions = {};
  EXPECT_TRUE(validate(b.m));
}

TEST(CommonMetadata, ViewsCompareByContentNotByAddress) {
  batch a({2, 3});
  batch b({2, 3});
  ASSERT_NE(a.m.block_table.data(), b.m.block_table.data());
  EXPECT_EQ(a.m, b.m);
  b.slot_mapping[4] = 7;
  EXPECT_NE(a.m, b.m);
  b.slot_mapping[4] = -1;
  EXPECT_EQ(a.m, b.m);
  b.block_table[1] = 5;
  EXPECT_NE(a.m, b.m);
  b.block_table[1] = 0;
  std::vector<int64_t> positions{0, 1, 2, 3, 4};
  b.m.positions = positions;
  EXPECT_NE(a.m, b.m);
  std::vector<int64_t> same_positions = positions;
  a.m.positions = same_positions;
  EXPECT_EQ(a.m, b.m);
}

TEST(CommonMetadata, QueryStartLocMayNotPassNumActualTokens) {
  batch b({2, 3});
  b.m.num_actual_tokens = 4;
  auto s = validate(b.m);
  ASSERT_FALSE(s);
  EXPECT_NE(s.err().message.find("exceeds num_actual_tokens 4"), std::string::npos);
}

TEST(SplitDecodesAndPrefills, AllDecodeWhenMaxQueryLenWithinThreshold) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({1, 1, 1}).m), (decode_prefill_split{3, 0, 3, 0}));
}

TEST(SplitDecodesAndPrefills, AllPrefillWhenFirstRequestIsAboveThreshold) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({4, 1, 7}).m), (decode_prefill_split{0, 3, 0, 12}));
}

TEST(SplitDecodesAndPrefills, SplitsAtFirstRequestAboveThreshold) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({1, 1, 5, 6}).m),
            (decode_prefill_split{2, 2, 2, 11}));
  EXPECT_EQ(*split_decodes_and_prefills(batch({2, 3, 5}).m, 3), (decode_prefill_split{2, 1, 5, 5}));
}

TEST(SplitDecodesAndPrefills, ZeroLengthPaddingRequestStartsThePrefills) {
  batch b({1, 1, 0, 4});
  EXPECT_EQ(*split_decodes_and_prefills(b.m), (decode_prefill_split{2, 2, 2, 4}));
}

TEST(SplitDecodesAndPrefills, PrefillTokensIncludeTokenPadding) {
  batch b({1, 6});
  b.m.num_actual_tokens = 8;
  b.slot_mapping.resize(8, -1);
  b.rebind();
  EXPECT_EQ(*split_decodes_and_prefills(b.m), (decode_prefill_split{1, 1, 1, 7}));
}

TEST(SplitDecodesAndPrefills, RequireUniformSplitsAtFirstDifferentQueryLen) {
  // Threshold 4: every request is short enough, but only the uniform prefix is a decode.
  EXPECT_EQ(*split_decodes_and_prefills(batch({3, 3, 2}).m, 4, true),
            (decode_prefill_split{2, 1, 6, 2}));
  EXPECT_EQ(*split_decodes_and_prefills(batch({3, 3, 3}).m, 4, true),
            (decode_prefill_split{3, 0, 9, 0}));
}

TEST(SplitDecodesAndPrefills, LooseMaxQueryLenStillFindsAllDecodes) {
  batch b({1, 1});
  b.m.max_query_len = 8; // an upper bound, not exact
  EXPECT_EQ(*split_decodes_and_prefills(b.m), (decode_prefill_split{2, 0, 2, 0}));
}

TEST(SplitDecodesAndPrefills, EmptyBatchHasNothing) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({}).m), decode_prefill_split{});
}

TEST(SplitDecodesAndPrefills, RejectsMisshapenQueryStartLocAndNegativeThreshold) {
  batch b({1, 2});
  b.m.query_start_loc.pop_back();
  auto r = split_decodes_and_prefills(b.m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("query_start_loc: 2 entries"), std::string::npos);
  auto t = split_decodes_and_prefills(batch({1}).m, -1);
  ASSERT_FALSE(t);
  EXPECT_NE(t.err().message.find("decode_threshold: -1"), std::string::npos);
}

} // namespace
} // namespace kvactor
