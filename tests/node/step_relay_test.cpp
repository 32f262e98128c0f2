// A node's gathering of a relayed step: one answer for all the node's ranks, due when every rank
// has answered, at once on a collective failure, with silent ranks named.
#include <gtest/gtest.h>

#include "actors/node/step_relay.hpp"

namespace kvactor {
namespace {

step_done done_by(int32_t rank, uint64_t seq = 7) {
  step_done d;
  d.seq = seq;
  d.rank = rank;
  d.sampled = {{100, 5}};
  return d;
}

TEST(StepRelay, AnswersOnceEveryRankHasExecutedTheStep) {
  step_relay relay(7, {2, 3});
  EXPECT_FALSE(relay.on_done(2, done_by(2)));
  EXPECT_TRUE(relay.on_done(3, done_by(3)));
  const auto out = relay.take();
  EXPECT_EQ(out.seq, 7u);
  ASSERT_EQ(out.done.size(), 2u);
  EXPECT_EQ(out.done[0].rank, 2);
  EXPECT_EQ(out.done[1].rank, 3);
  EXPECT_TRUE(out.rejected.empty());
  EXPECT_TRUE(out.silent.empty());
}

TEST(StepRelay, CarriesARejectionWithItsReasonAndRequests) {
  step_relay relay(7, {0, 1});
  EXPECT_FALSE(relay.on_error(0, error{errc::invalid_argument, "block id 9 is out of range"}, {4}));
  EXPECT_TRUE(relay.on_done(1, done_by(1)));
  const auto out = relay.take();
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].seq, 7u);
  EXPECT_EQ(out.rejected[0].rank, 0);
  EXPECT_EQ(out.rejected[0].reason.code, errc::invalid_argument);
  EXPECT_EQ(out.rejected[0].request_ids, std::vector<uint64_t>{4});
  EXPECT_EQ(out.done.size(), 1u);
}

TEST(StepRelay, AnswersAtOnceWhenACollectiveFailsWithoutWaitingForThePeers) {
  step_relay relay(7, {0, 1, 2});
  EXPECT_TRUE(relay.on_error(1, error{errc::collective_failed, "all_reduce timed out"}, {}))
      << "a peer stuck in the collective may never answer";
  const auto out = relay.take();
  ASSERT_EQ(out.rejected.size(), 1u);
  EXPECT_EQ(out.rejected[0].reason.code, errc::collective_failed);
  EXPECT_TRUE(out.done.empty());
  EXPECT_FALSE(relay.on_done(0, done_by(0))) << "answers after the reply change nothing";
}

TEST(StepRelay, NamesTheRanksThatDidNotAnswerInTime) {
  step_relay relay(7, {0, 1});
  EXPECT_FALSE(relay.on_done(0, done_by(0)));
  EXPECT_TRUE(relay.on_silent(1));
  const auto out = relay.take();
  EXPECT_EQ(out.silent, std::vector<int32_t>{1});
  EXPECT_EQ(out.done.size(), 1u);
}

TEST(StepRelay, SilencingTheRestNamesEveryRankStillOwingAnAnswerAndMakesItDue) {
  step_relay relay(7, {0, 1, 2});
  EXPECT_FALSE(relay.on_done(1, done_by(1)));
  EXPECT_TRUE(relay.silence_the_rest());
  const auto out = relay.take();
  EXPECT_EQ(out.silent, (std::vector<int32_t>{0, 2}));
  ASSERT_EQ(out.done.size(), 1u);
  EXPECT_FALSE(relay.silence_the_rest()) << "taken: nothing more to say";
}

TEST(StepRelay, IgnoresUnknownRanksAndSecondAnswers) {
  step_relay relay(7, {0, 1});
  EXPECT_FALSE(relay.on_done(5, done_by(5))) << "rank 5 is not on this node";
  EXPECT_FALSE(relay.on_done(0, done_by(0)));
  EXPECT_FALSE(relay.on_error(0, error{errc::step_failed, "late"}, {})) << "rank 0 answered";
  EXPECT_FALSE(relay.on_silent(0));
  EXPECT_TRUE(relay.on_done(1, done_by(1)));
  const auto out = relay.take();
  EXPECT_EQ(out.done.size(), 2u);
  EXPECT_TRUE(out.rejected.empty());
}

TEST(StepRelay, ANodeWithoutRanksForTheStepAnswersEmpty) {
  step_relay relay(7, {});
  const auto out = relay.take();
  EXPECT_EQ(out.seq, 7u);
  EXPECT_TRUE(out.done.empty() && out.rejected.empty() && out.silent.empty());
}

} // namespace
} // namespace kvactor
