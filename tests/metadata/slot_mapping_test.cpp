#include "actors/metadata/slot_mapping.hpp"

#include <gtest/gtest.h>

namespace kvactor {
namespace {

using ids = std::vector<int32_t>;
using slots = std::vector<int64_t>;

TEST(BlockTableWidth, RoundsToMultipleOf128TokensThenCountsKernelBlocks) {
  // bs 16: multiples of 8 blocks; 10 blocks -> 16 blocks -> 16 kernel entries.
  EXPECT_EQ(*block_table_width(10, 16), 16);
  // bs 16 split into kernel blocks of 8: twice the entries.
  EXPECT_EQ(*block_table_width(10, 16, 8), 32);
  // bs 48: 128 / gcd(128, 48) = 8 blocks.
  EXPECT_EQ(*block_table_width(9, 48), 16);
  // bs 256 already covers 128 tokens per block: no rounding.
  EXPECT_EQ(*block_table_width(3, 256, 64), 12);
}

TEST(BlockTableWidth, AlignmentZeroDisablesRounding) {
  EXPECT_EQ(*block_table_width(10, 16, 0, 0), 10);
  EXPECT_EQ(*block_table_width(10, 16, 4, 0), 40);
}

TEST(BlockTableWidth, RejectsKernelBlockSizeThatDoesNotDivideBlockSize) {
  auto w = block_table_width(10, 48, 32);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.err().code, errc::invalid_argument);
  EXPECT_NE(w.err().message.find("kernel_block_size: 32"), std::string::npos) << w.err().message;
}

TEST(BlockTableWidth, RejectsOutOfRangeSizesAndOverflow) {
  EXPECT_NE(block_table_width(-1, 16).err().message.find("max_blocks: -1"), std::string::npos);
  EXPECT_NE(block_table_width(4, 0).err().message.find("block_size: 0"), std::string::npos);
  EXPECT_NE(block_table_width(4, 16, 16, -8).err().message.find("token_alignment: -8"),
            std::string::npos);
  EXPECT_FALSE(block_table_width(1 << 30, 16, 1));
}

TEST(ExpandBlockIds, EachManagerBlockBecomesConsecutiveKernelBlocks) {
  EXPECT_EQ(*expand_block_ids(ids{3, 7}, 64, 16), (ids{12, 13, 14, 15, 28, 29, 30, 31}));
  EXPECT_EQ(*expand_block_ids(ids{3, 7}, 16), (ids{3, 7}));
  EXPECT_EQ(*expand_block_ids(ids{}, 16, 8), ids{});
}

TEST(ExpandBlockIds, RejectsBadSizesAndNegativeIds) {
  EXPECT_NE(expand_block_ids(ids{1}, 16, 5).err().message.find("kernel_block_size: 5"),
            std::string::npos);
  EXPECT_NE(expand_block_ids(ids{1, -2}, 16, 8).err().message.find("block_ids[1]: -2"),
            std::string::npos);
}

TEST(SlotMapping, SlotIsBlockIdTimesKernelBlockSizePlusOffset) {
  ids row{5, 9};
  EXPECT_EQ(slot_for_position(row, 0, 16), 80);
  EXPECT_EQ(slot_for_position(row, 15, 16), 95);
  EXPECT_EQ(slot_for_position(row, 16, 16), 144);
  EXPECT_EQ(slot_for_position(row, 20, 16), 148);
}

TEST(SlotMapping, ContextParallelRankKeepsOnlyItsTokens) {
  // docs/vllm-semantics.md §10 case 42: DCP 2, rank 1, interleave 1, kbs 16, table[0] = 5.
  ids row{5, 6};
  EXPECT_EQ(slot_for_position(row, 3, 16, 2, 1, 1), 81);
  EXPECT_EQ(slot_for_position(row, 2, 16, 2, 1, 1), -1);
  // Rank 0 holds the even positions: position 2 is its second local token.
  EXPECT_EQ(slot_for_position(row, 2, 16, 2, 0, 1), 81);
  // One table entry covers kbs * C = 32 tokens; position 33 is rank 1's first token of entry 1.
  EXPECT_EQ(slot_for_position(row, 33, 16, 2, 1, 1), 96);
}

TEST(SlotMapping, ContextParallelInterleaveDealsRunsOfTokens) {
  // Interleave 4, C 2: positions 0-3 on rank 0, 4-7 on rank 1, 8-11 on rank 0, ...
  ids row{2};
  EXPECT_EQ(slot_for_position(row, 5, 16, 2, 1, 4), 2 * 16 + 1);
  EXPECT_EQ(slot_for_position(row, 5, 16, 2, 0, 4), -1);
  EXPECT_EQ(slot_for_position(row, 9, 16, 2, 0, 4), 2 * 16 + 5);
}

TEST(SlotMapping, ComputesEveryRequestsTokensAndPadsTheWholeTail) {
  // Two requests, width 2: request 0 at positions 14..16, request 1 at position 3.
  ids table{5, 9, 2, 0};
  ids qsl{0, 3, 4};
  slots positions{14, 15, 16, 3};
  slots out(8, 777); // stale slots from an earlier, longer step
  ASSERT_TRUE(compute_slot_mapping(table, 2, qsl, positions, {16}, out));
  EXPECT_EQ(out, (slots{94, 95, 144, 35, -1, -1, -1, -1}));
}

TEST(SlotMapping, ContextParallelComputeMarksRemoteTokens) {
  ids table{5};
  ids qsl{0, 4};
  slots positions{0, 1, 2, 3};
  slots out(5, 0);
  ASSERT_TRUE(compute_slot_mapping(table, 1, qsl, positions, {16, 2, 1, 1}, out));
  EXPECT_EQ(out, (slots{-1, 80, -1, 81, -1}));
}

TEST(SlotMapping, KernelBlockSplittingNeverChangesSlotIds) {
  // Manager blocks of 64 tokens, ids [7, 3]; kernel blocks of 16 and of 64 give the same slots,
  // b * bs + p % bs.
  ids manager{7, 3};
  ids qsl{0, 6};
  slots positions{0, 17, 63, 64, 100, 127};
  slots expected;
  for (auto p : positions)
    expected.push_back(manager[static_cast<size_t>(p / 64)] * 64 + p % 64);
  for (int32_t kbs : {64, 32, 16, 8}) {
    auto table = expand_block_ids(manager, 64, kbs);
    ASSERT_TRUE(table);
    auto width = static_cast<int32_t>(table->size());
    slots out(6, 0);
    ASSERT_TRUE(compute_slot_mapping(*table, width, qsl, positions, {kbs}, out));
    EXPECT_EQ(out, expected) << "kernel_block_size " << kbs;
  }
}

TEST(SlotMapping, RejectsBadParams) {
  ids table{5};
  ids qsl{0, 1};
  slots positions{0};
  slots out(1);
  auto msg = [&](slot_mapping_params p) {
    auto s = compute_slot_mapping(table, 1, qsl, positions, p, out);
    return s ? std::string{} : s.err().message;
  };
  EXPECT_NE(msg({0}).find("kernel_block_size: 0"), std::string::npos);
  EXPECT_NE(msg({16, 0}).find("cp_size: 0"), std::string::npos);
  EXPECT_NE(msg({16, 2, 2}).find("cp_rank: 2"), std::string::npos);
  EXPECT_NE(msg({16, 2, 1, 0}).find("cp_interleave: 0"), std::string::npos);
}

TEST(SlotMapping, RejectsShortBuffersAndPositionsBeyondTheTable) {
  ids table{5, 6};
  ids qsl{0, 2};
  slots out(4, 123);
  auto msg = [&](std::span<const int32_t> t, std::span<const int32_t> q, std::span<const int64_t> p,
                 std::span<int64_t> o) {
    auto s = compute_slot_mapping(t, 2, q, p, {16}, o);
    return s ? std::string{} : s.err().message;
  };
  EXPECT_NE(msg(table, qsl, slots{0}, out).find("positions: 1 entries"), std::string::npos);
  EXPECT_NE(msg(table, qsl, slots{0, 32}, out).find("positions[1]: 32"), std::string::npos);
  EXPECT_NE(msg(table, qsl, slots{0, -1}, out).find("positions[1]: -1"), std::string::npos);
  slots small(1);
  EXPECT_NE(msg(table, qsl, slots{0, 1}, small).find("slot_mapping buffer: 1"), std::string::npos);
  EXPECT_NE(msg(ids{5}, qsl, slots{0, 1}, out).find("block_table: 1 entries"), std::string::npos);
  EXPECT_NE(msg(table, ids{}, slots{}, out).find("query_start_loc: empty"), std::string::npos);
  EXPECT_NE(msg(table, ids{1, 2}, slots{0, 1}, out).find("query_start_loc[0]: 1"),
            std::string::npos);
  EXPECT_NE(msg(ids{5, 6, 7, 8}, ids{0, 2, 1}, slots{0, 1}, out).find("query_start_loc[2]: 1"),
            std::string::npos);
  // Failures never touch the buffer.
  EXPECT_EQ(out, (slots{123, 123, 123, 123}));
}

} // namespace
} // namespace kvactor
