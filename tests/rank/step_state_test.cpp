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

// validate() takes its steps in a fixed order (sequence, ubatches, new requests, block updates,
// duplicates, each scheduled request with its coverage, limits) and names the first failure: the
// exact message and the requests it is about, for every check.
TEST(StepState, EveryCheckNamesItsFailureAndTheEarlierCheckWins) {
  const step_state st({{16, 16, true}}, 64, 256, 128, 4);
  auto plan = [](std::vector<int32_t> blocks, std::vector<scheduled_request> scheduled) {
    step_plan p;
    p.new_requests = {{1, 20, 4}};
    p.block_updates = {{1, 0, 0, std::move(blocks)}};
    p.scheduled = std::move(scheduled);
    return p;
  };
  auto tokens = [](uint64_t id, int32_t computed, size_t n) {
    return scheduled_request{id, computed, std::vector<int32_t>(n, 7), true};
  };
  struct rejected {
    step_plan plan;
    std::string message;
    std::vector<uint64_t> ids;
  };
  std::vector<rejected> cases;
  auto add = [&](step_plan p, std::string message, std::vector<uint64_t> ids) {
    cases.push_back({std::move(p), std::move(message), std::move(ids)});
  };
  {
    auto p = plan({1, 2}, {tokens(1, 0, 20)});
    p.seq = 1;
    p.num_ubatches = 3;
    add(p, "seq: gap, got step 1 but expected 0", {});
  }
  {
    auto p = plan({1, 2}, {tokens(1, 0, 20)});
    p.num_ubatches = 3;
    p.new_requests.push_back({1, 20, 4});
    add(p, "num_ubatches: 3 is not 1 or 2", {});
  }
  {
    auto p = plan({1, 2}, {tokens(1, 0, 20)});
    p.new_requests.push_back({1, 20, 4});
    add(p, "new_requests: request 1 is already active", {1});
  }
  {
    auto p = plan({1, 2}, {tokens(1, 0, 20)});
    p.new_requests[0].prompt_len = 256;
    add(p,
        "new_requests: request 1 has prompt_len 256 / max_output_tokens 4 (prompt_len must be "
        "in [1, 256))",
        {1});
  }
  {
    auto p = plan({1, 2}, {tokens(1, 0, 20)});
    p.block_updates.push_back({2, 0, 0, {3}});
    add(p, "block_updates: unknown request 2", {2});
  }
  {
    auto p = plan({1, 2}, {tokens(1, 0, 20)});
    p.block_updates[0].group_id = 1;
    add(p, "block_updates: group_id 1 of request 1 is outside [0, 1)", {1});
  }
  {
    auto p = plan({1, 2}, {tokens(1, 0, 20)});
    p.block_updates[0].start = 1;
    add(p, "block_updates: start 1 of request 1 (group 0) leaves a gap after 0 blocks", {1});
  }
  add(plan({1, 64}, {tokens(99, 0, 1)}),
      "block_updates: block id 64 of request 1 (group 0) is outside [0, 64)", {1});
  add(plan({1, 2}, {tokens(99, 0, 1), tokens(1, 0, 20), tokens(1, 0, 20)}),
      "scheduled: request 1 appears twice", {1});
  add(plan({1, 2}, {tokens(99, 0, 1), tokens(1, 0, 20)}), "scheduled: unknown request 99", {99});
  add(plan({1, 2}, {tokens(1, 3, 20)}),
      "scheduled: request 1 has num_computed_tokens 3, this rank has 0", {1});
  add(plan({1, 2}, {tokens(1, 0, 0)}), "scheduled: request 1 has no tokens", {1});
  add(plan({1, 2}, {tokens(1, 0, 257)}),
      "scheduled: request 1 reaches position 257 beyond max_model_len 256", {1});
  add(plan({1}, {tokens(1, 0, 20)}),
      "block_updates: the block table of request 1 (group 0) does not cover position 16", {1});
  add(plan({1, 0}, {tokens(1, 0, 20)}),
      "block_updates: the block table of request 1 (group 0) does not cover position 16", {1});
  add(plan({1, 2, 3, 4, 5, 6, 7, 8, 9}, {tokens(1, 0, 129)}),
      "scheduled: 129 tokens exceed max_num_batched_tokens 128", {});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    auto r = st.validate(c.plan);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->err.code, errc::invalid_argument);
    EXPECT_EQ(r->err.message, c.message);
    EXPECT_EQ(r->request_ids, c.ids);
  }
  EXPECT_FALSE(st.validate(plan({1, 2}, {tokens(1, 0, 20)})));
}
