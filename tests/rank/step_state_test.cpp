// The rank's step core on its own: batch layout and the flags builders read.
#include <gtest/gtest.h>

#include "actors/rank/step_state.hpp"

using namespace kvactor;

namespace {

step_state two_groups() {
  // A full-attention group and a sliding one, 16-token blocks, 64 blocks, max length 256.
  return step_state({{16, 16, true}, {16, 16, true}}, 64, 256, 128, 8);
}

step_plan admit(uint64_t id, int32_t prompt_len, std::vector<int32_t> blocks) {
  step_plan p;
  p.new_requests = {{id, prompt_len, 4}};
  p.block_updates = {{id, 0, 0, blocks}, {id, 1, 0, blocks}};
  return p;
}

} // namespace

TEST(StepState, PrefillingFlagsFollowTheTokensComputedBeforeTheStep) {
  auto st = two_groups();
  auto p = admit(1, 20, {1, 2});
  p.scheduled = {{1, 0, std::vector<int32_t>(12, 7), false}};
  ASSERT_FALSE(st.validate(p));
  step_batch b;
  st.apply(p, b);
  ASSERT_EQ(b.is_prefilling.size(), 1u);
  EXPECT_TRUE(b.is_prefilling[0]);
  // The last prompt chunk is still a prefill; the decode after it is not.
  step_plan last;
  last.seq = 1;
  last.scheduled = {{1, 12, std::vector<int32_t>(8, 7), true}};
  ASSERT_FALSE(st.validate(last));
  st.apply(last, b);
  EXPECT_TRUE(b.is_prefilling[0]);
  EXPECT_EQ(b.sample_rows, std::vector<int32_t>{7});
  step_plan decode;
  decode.seq = 2;
  decode.scheduled = {{1, 20, {5}, true}};
  ASSERT_FALSE(st.validate(decode));
  st.apply(decode, b);
  EXPECT_FALSE(b.is_prefilling[0]);
  EXPECT_EQ(b.positions, std::vector<int64_t>{20});
  EXPECT_EQ(b.seq_lens, std::vector<int32_t>{21});
}

TEST(StepState, ReleasedBlocksStayNullInTheKernelTable) {
  step_state st({{32, 16, true}}, 64, 256, 128, 8);
  step_plan p;
  p.new_requests = {{1, 40, 4}};
  p.block_updates = {{1, 0, 0, {3, 5}}};
  p.scheduled = {{1, 0, std::vector<int32_t>(40, 1), true}};
  ASSERT_FALSE(st.validate(p));
  step_batch b;
  st.apply(p, b);
  // Manager block 3 of 32 tokens is kernel blocks 6 and 7 of 16.
  EXPECT_EQ(b.block_rows[0][0], 6);
  EXPECT_EQ(b.block_rows[0][1], 7);
  EXPECT_EQ(b.block_rows[0][2], 10);
  step_plan release;
  release.seq = 1;
  release.block_updates = {{1, 0, 0, {0}}};
  release.scheduled = {{1, 40, {2}, true}};
  ASSERT_FALSE(st.validate(release));
  st.apply(release, b);
  EXPECT_EQ(b.block_rows[0][0], 0);
  EXPECT_EQ(b.block_rows[0][1], 0);
}

TEST(StepState, TooManyRequestsOrTokensAreRejectedNamingTheLimit) {
  step_state st({{16, 16, true}}, 64, 256, 4, 1);
  auto p = admit(1, 8, {1});
  p.block_updates.pop_back();
  p.scheduled = {{1, 0, std::vector<int32_t>(8, 1), true}};
  auto r = st.validate(p);
  ASSERT_TRUE(r);
  EXPECT_NE(r->err.message.find("max_num_batched_tokens"), std::string::npos);
  EXPECT_EQ(st.next_seq(), 0u);
}
