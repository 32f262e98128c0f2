#include "actors/metadata/common_metadata.hpp"

#include <gtest/gtest.h>

namespace kvactor {
namespace {

// A valid batch with the given query lengths; seq_len = 10 + query, one block-table entry.
common_attention_metadata batch(std::vector<int32_t> query_lens) {
  common_attention_metadata m;
  m.num_reqs = static_cast<int32_t>(query_lens.size());
  m.query_start_loc = {0};
  for (auto q : query_lens) {
    m.query_start_loc.push_back(m.query_start_loc.back() + q);
    m.seq_lens.push_back(10 + q);
    m.max_query_len = std::max(m.max_query_len, q);
  }
  m.num_actual_tokens = m.query_start_loc.back();
  m.block_table_width = 1;
  m.block_table.assign(query_lens.size(), 0);
  m.slot_mapping.assign(static_cast<size_t>(m.num_actual_tokens), -1);
  return m;
}

TEST(CommonMetadata, ValidBatchPassesValidation) {
  EXPECT_TRUE(validate(batch({1, 1, 5})));
  EXPECT_TRUE(validate(batch({})));
}

TEST(CommonMetadata, QueryLenAndBlockTableRowReadTheBuffers) {
  auto m = batch({2, 3});
  m.block_table_width = 2;
  m.block_table = {7, 8, 9, 10};
  EXPECT_EQ(m.query_len(1), 3);
  auto row = m.block_table_row(1);
  EXPECT_EQ(std::vector<int32_t>(row.begin(), row.end()), (std::vector<int32_t>{9, 10}));
}

TEST(CommonMetadata, ValidationNamesTheMisshapenField) {
  auto m = batch({2, 3});
  m.query_start_loc.pop_back();
  auto s = validate(m);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.err().code, errc::invalid_argument);
  EXPECT_NE(s.err().message.find("query_start_loc"), std::string::npos) << s.err().message;

  m = batch({2, 3});
  m.query_start_loc = {0, 4, 3};
  ASSERT_FALSE(validate(m));
  EXPECT_NE(validate(m).err().message.find("query_start_loc[2]: 3"), std::string::npos);

  m = batch({2, 3});
  m.slot_mapping.resize(4);
  EXPECT_NE(validate(m).err().message.find("slot_mapping: 4"), std::string::npos);

  m = batch({2, 3});
  m.block_table.push_back(1);
  EXPECT_NE(validate(m).err().message.find("block_table: 3"), std::string::npos);

  m = batch({2, 3});
  m.seq_lens[1] = -1;
  EXPECT_NE(validate(m).err().message.find("seq_lens[1]: -1"), std::string::npos);

  m = batch({2, 3});
  m.is_prefilling = {true};
  EXPECT_NE(validate(m).err().message.find("is_prefilling"), std::string::npos);

  m = batch({2, 3});
  m.num_logits_indices = 2;
  EXPECT_NE(validate(m).err().message.find("num_logits_indices: 2"), std::string::npos);
}

TEST(CommonMetadata, QueryStartLocMayNotPassNumActualTokens) {
  auto m = batch({2, 3});
  m.num_actual_tokens = 4;
  auto s = validate(m);
  ASSERT_FALSE(s);
  EXPECT_NE(s.err().message.find("exceeds num_actual_tokens 4"), std::string::npos);
}

TEST(SplitDecodesAndPrefills, AllDecodeWhenMaxQueryLenWithinThreshold) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({1, 1, 1})), (decode_prefill_split{3, 0, 3, 0}));
}

TEST(SplitDecodesAndPrefills, AllPrefillWhenFirstRequestIsAboveThreshold) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({4, 1, 7})), (decode_prefill_split{0, 3, 0, 12}));
}

TEST(SplitDecodesAndPrefills, SplitsAtFirstRequestAboveThreshold) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({1, 1, 5, 6})), (decode_prefill_split{2, 2, 2, 11}));
  EXPECT_EQ(*split_decodes_and_prefills(batch({2, 3, 5}), 3), (decode_prefill_split{2, 1, 5, 5}));
}

TEST(SplitDecodesAndPrefills, ZeroLengthPaddingRequestStartsThePrefills) {
  auto m = batch({1, 1, 0, 4});
  EXPECT_EQ(*split_decodes_and_prefills(m), (decode_prefill_split{2, 2, 2, 4}));
}

TEST(SplitDecodesAndPrefills, PrefillTokensIncludeTokenPadding) {
  auto m = batch({1, 6});
  m.num_actual_tokens = 8;
  m.slot_mapping.resize(8, -1);
  EXPECT_EQ(*split_decodes_and_prefills(m), (decode_prefill_split{1, 1, 1, 7}));
}

TEST(SplitDecodesAndPrefills, RequireUniformSplitsAtFirstDifferentQueryLen) {
  // Threshold 4: every request is short enough, but only the uniform prefix is a decode.
  EXPECT_EQ(*split_decodes_and_prefills(batch({3, 3, 2}), 4, true),
            (decode_prefill_split{2, 1, 6, 2}));
  EXPECT_EQ(*split_decodes_and_prefills(batch({3, 3, 3}), 4, true),
            (decode_prefill_split{3, 0, 9, 0}));
}

TEST(SplitDecodesAndPrefills, LooseMaxQueryLenStillFindsAllDecodes) {
  auto m = batch({1, 1});
  m.max_query_len = 8; // an upper bound, not exact
  EXPECT_EQ(*split_decodes_and_prefills(m), (decode_prefill_split{2, 0, 2, 0}));
}

TEST(SplitDecodesAndPrefills, EmptyBatchHasNothing) {
  EXPECT_EQ(*split_decodes_and_prefills(batch({})), decode_prefill_split{});
}

TEST(SplitDecodesAndPrefills, RejectsMisshapenQueryStartLocAndNegativeThreshold) {
  auto m = batch({1, 2});
  m.query_start_loc.pop_back();
  auto r = split_decodes_and_prefills(m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("query_start_loc: 2 entries"), std::string::npos);
  auto t = split_decodes_and_prefills(batch({1}), -1);
  ASSERT_FALSE(t);
  EXPECT_NE(t.err().message.find("decode_threshold: -1"), std::string::npos);
}

} // namespace
} // namespace kvactor
