// The driver's gathering of one step's replies, and what it decides once every rank answered.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "actors/driver/step_replies.hpp"

using namespace kvactor;
using ::testing::HasSubstr;
using action = step_verdict::action;

namespace {

step_plan plan_of(std::vector<uint64_t> scheduled, uint64_t seq = 5) {
  step_plan p;
  p.seq = seq;
  p.epoch = 1;
  for (auto id : scheduled)
    p.scheduled.push_back({id, 0, {1}, true});
  p.new_requests = {{scheduled.front(), 1, 4}};
  return p;
}

step_done done_by(int32_t rank, std::vector<sampled_token> sampled) {
  step_done d;
  d.seq = 5;
  d.epoch = 1;
  d.rank = rank;
  d.sampled = std::move(sampled);
  return d;
}

} // namespace

TEST(StepReplies, WaitsForEveryRankThenAppliesRankZerosReply) {
  step_replies r(2);
  EXPECT_FALSE(r.on_done(1, done_by(1, {{7, 3}})));
  EXPECT_TRUE(r.on_done(0, done_by(0, {{7, 3}})));
  auto v = r.verdict(plan_of({7}));
  EXPECT_EQ(v.what, action::apply);
  EXPECT_TRUE(v.failed.empty());
  ASSERT_TRUE(v.done);
  EXPECT_EQ(v.done->rank, 0) << "rank 0's reply, although rank 1 answered first";
}

TEST(StepReplies, RanksThatSampleDifferentTokensFailTheStepsRequests) {
  step_replies r(2);
  r.on_done(0, done_by(0, {{7, 3}, {8, 4}}));
  r.on_done(1, done_by(1, {{7, 3}, {8, 5}}));
  auto v = r.verdict(plan_of({7, 8}));
  EXPECT_EQ(v.what, action::apply);
  EXPECT_EQ(v.failed, (std::set<uint64_t>{7, 8}));
  EXPECT_EQ(v.why, "rank 1 sampled other tokens than rank 0 at step 5");
}

TEST(StepReplies, ARejectionNamingRequestsResendsThePlanWithoutThem) {
  step_replies r(2);
  r.on_done(0, done_by(0, {}));
  EXPECT_TRUE(r.on_error(1, make_error(errc::invalid_argument, "block_updates: bad"), {8}));
  auto v = r.verdict(plan_of({7, 8}));
  EXPECT_EQ(v.what, action::resend);
  EXPECT_EQ(v.failed, std::set<uint64_t>{8});
  EXPECT_EQ(v.why, "block_updates: bad");
  auto again = without(plan_of({7, 8}), v.failed);
  ASSERT_EQ(again.scheduled.size(), 1u);
  EXPECT_EQ(again.scheduled[0].request_id, 7u);
  EXPECT_EQ(again.finished_requests, std::vector<uint64_t>{8});
  EXPECT_EQ(again.seq, 5u) << "re-sent under the same seq";
}

TEST(StepReplies, ARejectionOfTheWholeStepFailsEveryScheduledRequest) {
  step_replies r(1);
  r.on_error(0, make_error(errc::invalid_argument, "seq: out of order"), {});
  auto v = r.verdict(plan_of({7, 8}));
  EXPECT_EQ(v.what, action::reject);
  EXPECT_EQ(v.failed, (std::set<uint64_t>{7, 8}));
}

TEST(StepReplies, AFailureAfterApplyConsumesTheSeq) {
  step_replies r(1);
  r.on_error(0, make_error(errc::step_failed, "step 5: kernel"), {});
  EXPECT_EQ(r.verdict(plan_of({7})).what, action::consumed);
}

TEST(StepReplies, TheFirstCollectiveFailureIsSeenOnceAndEveryFailureIsKept) {
  step_replies r(3);
  EXPECT_FALSE(r.on_error(2, make_error(errc::collective_failed, "timed out"), {}));
  EXPECT_TRUE(r.collective_failed_now());
  EXPECT_FALSE(r.on_error(0, make_error(errc::collective_failed, "aborted"), {}));
  EXPECT_FALSE(r.collective_failed_now()) << "only the first one starts the diagnosis";
  EXPECT_TRUE(r.collective_failed());
  EXPECT_TRUE(r.on_done(1, done_by(1, {})));
  ASSERT_EQ(r.failures().size(), 2u);
  EXPECT_EQ(r.failures()[0], (std::pair<int32_t, std::string>{2, "timed out"}));
  EXPECT_EQ(r.failures()[1], (std::pair<int32_t, std::string>{0, "aborted"}));
  EXPECT_EQ(r.verdict(plan_of({7})).what, action::consumed);
}

TEST(StepReplies, ASecondAnswerFromOneRankIsIgnoredSoARetransmittedStepCountsOnce) {
  step_replies r(2);
  EXPECT_FALSE(r.on_done(0, done_by(0, {{7, 3}})));
  EXPECT_FALSE(r.on_done(0, done_by(0, {{7, 3}}))) << "rank 0 answered twice: still waits";
  EXPECT_FALSE(r.on_error(0, make_error(errc::invalid_argument, "seq: late copy"), {}))
      << "an error after rank 0's first answer changes nothing";
  EXPECT_EQ(r.silent(), (std::vector<int32_t>{1}));
  EXPECT_TRUE(r.on_done(1, done_by(1, {{7, 3}})));
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(r.verdict(plan_of({7})).what, action::apply);
}

TEST(StepReplies, NamesTheRanksThatHaveNotAnswered) {
  step_replies r(3);
  r.on_done(1, done_by(1, {}));
  EXPECT_TRUE(r.answered(1));
  EXPECT_FALSE(r.answered(0));
  EXPECT_FALSE(r.answered(7)) << "no such rank";
  EXPECT_EQ(r.silent(), (std::vector<int32_t>{0, 2}));
  EXPECT_FALSE(r.complete());
}

TEST(StepReplies, AnswersAfterCloseOrFromAnUnknownRankChangeNothing) {
  step_replies r(1);
  EXPECT_FALSE(r.on_done(3, done_by(3, {})));
  EXPECT_FALSE(r.on_done(-1, done_by(0, {})));
  r.close();
  EXPECT_FALSE(r.on_done(0, done_by(0, {})));
  EXPECT_TRUE(r.closed());
  EXPECT_FALSE(r.complete());
}

TEST(StepReplies, AnErrorAfterCloseIsKeptForTheDiagnosisAndChangesNothingElse) {
  step_replies r(3);
  EXPECT_FALSE(r.on_error(1, make_error(errc::collective_failed, "aborted"), {}));
  EXPECT_TRUE(r.collective_failed_now());
  r.close(); // the diagnosis starts at the first collective failure
  EXPECT_FALSE(r.on_error(0, make_error(errc::collective_failed, "timed out"), {}));
  EXPECT_FALSE(r.collective_failed_now()) << "the diagnosis is not started twice";
  EXPECT_FALSE(r.on_error(0, make_error(errc::collective_failed, "again"), {}))
      << "a rank's second answer still counts once";
  EXPECT_FALSE(r.on_error(9, make_error(errc::collective_failed, "no such rank"), {}));
  ASSERT_EQ(r.failures().size(), 2u);
  EXPECT_EQ(r.failures()[1], (std::pair<int32_t, std::string>{0, "timed out"}));
  EXPECT_FALSE(r.complete());
  EXPECT_EQ(r.silent(), (std::vector<int32_t>{0, 2})) << "who answered stays as at close()";
  EXPECT_FALSE(r.answered(0));
}
