// diff_messages: the first differing field of two messages, by name, timings ignored.
#include <gtest/gtest.h>

#include "deploy/message_diff.hpp"
#include "messages/step.hpp"

using namespace kvactor;

namespace {

step_plan plan() {
  step_plan p;
  p.seq = 7;
  p.epoch = 1;
  p.scheduled = {{1, 0, {5, 6, 7}, true}, {2, 4, {9}, true}};
  return p;
}

} // namespace

TEST(MessageDiff, EqualMessagesHaveNoDifference) {
  EXPECT_EQ(diff_messages(plan(), plan()), "");
}

TEST(MessageDiff, NamesTheFirstDifferingNestedField) {
  auto b = plan();
  b.scheduled[1].token_ids[0] = 10;
  EXPECT_EQ(diff_messages(plan(), b),
            "step_plan.scheduled[1].token_ids[0]: recorded integer 9, replayed integer 10");
}

TEST(MessageDiff, ReportsListsOfDifferentLength) {
  auto b = plan();
  b.scheduled.pop_back();
  EXPECT_EQ(diff_messages(plan(), b), "step_plan.scheduled: recorded 2 elements, replayed 1");
}

TEST(MessageDiff, IgnoresWallClockTimings) {
  step_done a{3, 1, 0, {{1, 42}}, {100, 10, 80}, {}};
  auto b = a;
  b.timing = {999, 99, 900};
  EXPECT_EQ(diff_messages(a, b), "");
  b.sampled[0].token = 43;
  EXPECT_EQ(diff_messages(a, b),
            "step_done.sampled[0].token: recorded integer 42, replayed integer 43");
}
