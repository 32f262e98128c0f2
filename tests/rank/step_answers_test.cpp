// A step the rank has seen before gets the answer its first copy got (re-sent steps, copies).
#include <gtest/gtest.h>

#include "actors/rank/step_answers.hpp"

using namespace kvactor;
using seen = step_answers::seen;

namespace {

step_plan plan_at(uint64_t seq) {
  step_plan p;
  p.seq = seq;
  p.epoch = 1;
  p.new_requests = {{3, 4, 8, {}}};
  p.scheduled = {{3, 0, {1, 2, 3, 4}, true}};
  return p;
}

step_done done_at(uint64_t seq) {
  step_done d;
  d.seq = seq;
  d.epoch = 1;
  d.sampled = {{3, 42}};
  return d;
}

} // namespace

TEST(StepAnswers, AFirstStepIsNew) {
  step_answers a;
  EXPECT_EQ(a.classify(plan_at(0)), seen::new_step);
}

TEST(StepAnswers, ACopyOfTheStepInFlightWaitsForItsAnswer) {
  step_answers a;
  const auto flying = plan_at(0);
  a.begin(flying);
  EXPECT_EQ(a.classify(plan_at(0)), seen::in_flight);
}

TEST(StepAnswers, ACopyOfTheLastStepGetsItsAnswerAgain) {
  step_answers a;
  const auto flying = plan_at(0);
  a.begin(flying);
  a.end(flying, done_at(0));
  ASSERT_EQ(a.classify(plan_at(0)), seen::answered);
  ASSERT_TRUE(a.last());
  EXPECT_EQ(*a.last(), done_at(0));
}

TEST(StepAnswers, AFailedStepIsAnsweredWithTheSameErrorAgain) {
  step_answers a;
  const auto flying = plan_at(4);
  a.begin(flying);
  a.end(flying, make_error(errc::step_failed, "step 4: kernel failed"));
  ASSERT_EQ(a.classify(plan_at(4)), seen::answered);
  ASSERT_FALSE(a.last());
  EXPECT_EQ(a.last().err().code, errc::step_failed);
}

TEST(StepAnswers, AnotherPlanUnderTheSameSeqIsNewSoValidationRejectsIt) {
  step_answers a;
  const auto flying = plan_at(2);
  a.begin(flying);
  auto other = plan_at(2);
  other.scheduled[0].token_ids.push_back(5);
  EXPECT_EQ(a.classify(other), seen::new_step) << "in flight";
  a.end(flying, done_at(2));
  EXPECT_EQ(a.classify(other), seen::new_step) << "answered";
  auto later_epoch = plan_at(2);
  later_epoch.epoch = 2;
  EXPECT_EQ(a.classify(later_epoch), seen::new_step);
}

TEST(StepAnswers, OnlyTheLastStepIsRemembered) {
  step_answers a;
  const auto first = plan_at(0), second = plan_at(1);
  a.begin(first);
  a.end(first, done_at(0));
  a.begin(second);
  a.end(second, done_at(1));
  EXPECT_EQ(a.classify(plan_at(0)), seen::new_step) << "older copies are stale: validation";
  EXPECT_EQ(a.classify(plan_at(1)), seen::answered);
}
