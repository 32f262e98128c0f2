#include "actors/metadata/ubatch_inputs.hpp"

#include <gtest/gtest.h>

#include "views.hpp"

namespace kvactor {
namespace {

using ints = std::vector<int32_t>;
using longs = std::vector<int64_t>;
using test::vec;

// The case-51 batch as the rank lays it out: queries [3,5,4] at computed lengths [10,20,0]
// (seq_lens [13,25,4]); group 0 positional (block size 16, two columns), group 1 a state group
// (one column, no slots).
step_batch case51_batch() {
  step_batch b;
  b.seq = 7;
  b.request_ids = {1, 2, 3};
  b.token_ids.assign(12, 0);
  b.positions = {10, 11, 12, 20, 21, 22, 23, 24, 0, 1, 2, 3};
  b.query_start_loc = {0, 3, 8, 12};
  b.seq_lens = {13, 25, 4};
  b.is_prefilling = {false, true, true};
  b.block_rows = {{1, 2, 3, 4, 5, 6}, {7, 8, 9}};
  b.widths = {2, 1};
  b.max_query_len = 5;
  b.max_seq_len = 25;
  return b;
}

std::vector<group_geometry> case51_groups() {
  return {{16, 16, true}, {16, 16, false}};
}

ubatch_work work(int32_t ubatch, int32_t token_start, int32_t token_end, int32_t req_start,
                 int32_t req_end) {
  return {7, ubatch, token_start, token_end, req_start, req_end};
}

TEST(SliceInputs, SlotMappingsGoIntoTheGivenBuffersAndBlockRowsViewTheBatch) {
  const auto batch = case51_batch();
  const auto groups = case51_groups();
  std::vector<longs> slot_buffers;
  // The second slice: request 1's last 2 tokens and request 2's 4.
  auto in = slice_inputs(batch, work(1, 6, 12, 1, 3), groups, slot_buffers);
  ASSERT_TRUE(in) << in.err().message;
  EXPECT_EQ(in->num_reqs, 2);
  EXPECT_EQ(in->num_tokens, 6);
  EXPECT_EQ(in->ubatch_idx, 1);
  EXPECT_EQ(in->query_start_loc, (ints{0, 2, 6}));
  EXPECT_EQ(in->seq_lens, (ints{25, 4}));
  EXPECT_EQ(in->max_query_len, 4);
  EXPECT_EQ(in->is_prefilling, (std::vector<bool>{true, true}));
  ASSERT_EQ(slot_buffers.size(), 2u);
  ASSERT_EQ(in->groups.size(), 2u);

  // Positions and block rows are views of the batch, from token 6 and request 1's row.
  EXPECT_EQ(in->positions.data(), batch.positions.data() + 6);
  EXPECT_EQ(vec(in->positions), (longs{23, 24, 0, 1, 2, 3}));
  EXPECT_EQ(in->groups[0].width, 2);
  EXPECT_EQ(in->groups[0].block_table.data(), batch.block_rows[0].data() + 2);
  EXPECT_EQ(vec(in->groups[0].block_table), (ints{3, 4, 5, 6}));
  EXPECT_EQ(in->groups[1].width, 1);
  EXPECT_EQ(in->groups[1].block_table.data(), batch.block_rows[1].data() + 1);
  EXPECT_EQ(vec(in->groups[1].block_table), (ints{8, 9}));

  // Slot mappings are written into the caller's buffers and viewed there.
  EXPECT_EQ(in->groups[0].slot_mapping.data(), slot_buffers[0].data());
  EXPECT_EQ(slot_buffers[0], (longs{4 * 16 + 7, 4 * 16 + 8, 80, 81, 82, 83}));
  EXPECT_EQ(vec(in->groups[0].slot_mapping), slot_buffers[0]);
  EXPECT_EQ(in->groups[1].slot_mapping.data(), slot_buffers[1].data());
  EXPECT_EQ(slot_buffers[1], longs(6, -1)); // a state group writes no KV slots
}

TEST(SliceInputs, TheNextSliceReusesTheBuffers) {
  const auto batch = case51_batch();
  const auto groups = case51_groups();
  std::vector<longs> slot_buffers;
  auto first = slice_inputs(batch, work(0, 0, 6, 0, 2), groups, slot_buffers);
  ASSERT_TRUE(first) << first.err().message;
  EXPECT_EQ(first->seq_lens, (ints{13, 23})); // request 1 leaves 2 tokens to the next slice
  EXPECT_EQ(first->groups[0].block_table.data(), batch.block_rows[0].data());
  EXPECT_EQ(slot_buffers[0], (longs{26, 27, 28, 68, 69, 70}));
  const auto* buffer = slot_buffers[0].data();
  auto second = slice_inputs(batch, work(0, 6, 12, 1, 3), groups, slot_buffers);
  ASSERT_TRUE(second) << second.err().message;
  // Same capacity, same address: a step allocates nothing.
  EXPECT_EQ(slot_buffers[0].data(), buffer);
  EXPECT_EQ(second->groups[0].slot_mapping.data(), buffer);
  EXPECT_EQ(vec(second->groups[0].slot_mapping), (longs{71, 72, 80, 81, 82, 83}));
}

TEST(SliceInputs, RejectsASliceOutsideTheBatchAndMismatchedGroups) {
  const auto batch = case51_batch();
  std::vector<longs> slot_buffers;
  auto r = slice_inputs(batch, work(0, 6, 13, 1, 3), case51_groups(), slot_buffers);
  ASSERT_FALSE(r);
  EXPECT_NE(r.err().message.find("ubatch_work: slice tokens [6, 13)"), std::string::npos)
      << r.err().message;
  auto g = slice_inputs(batch, work(0, 0, 12, 0, 3), {{16, 16, true}}, slot_buffers);
  ASSERT_FALSE(g);
  EXPECT_NE(g.err().message.find("groups: 1 given for a batch of 2"), std::string::npos)
      << g.err().message;
}

} // namespace
} // namespace kvactor
