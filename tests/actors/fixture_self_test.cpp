// The test support itself: a protocol deviation must fail the test (never pass silently, never
// hang). Each test provokes one deviation and checks that exactly the expected failure is reported.
#include <string>
#include <vector>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/cudagraph/actor.hpp"
#include "actors/spawn_plain.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/mock_rank.hpp"
#include "tests/support/recorder.hpp"

namespace kvactor::test {
namespace {

// Collects the failures `f` reports instead of failing the running test.
template <class F>
std::vector<std::string> failures_of(F f) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  std::vector<std::string> out;
  for (int i = 0; i < results.size(); ++i)
    out.push_back(results.GetTestPartResult(i).message());
  return out;
}

class FixtureSelfTest : public deterministic_fixture {
protected:
  cudagraph_actor graphs = spawn(plain<&cudagraph>, nullptr);
  recorder_handle rec = track(spawn_recorder(sys));
  recorder_handle other = track(spawn_recorder(sys));

  FixtureSelfTest() { run_all(); }
};

TEST_F(FixtureSelfTest, PeekOnAnEmptyMailboxFailsInsteadOfBlocking) {
  std::optional<std::tuple<batch_descriptor>> got;
  auto failures = failures_of([&] { got = peek_from<batch_descriptor>(graphs, rec.actor); });
  EXPECT_FALSE(got);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("is empty"), std::string::npos) << failures[0];
}

TEST_F(FixtureSelfTest, PeekFailsOnTheWrongSender) {
  inject(other.actor, rec.actor, std::string{"hello"});
  std::optional<std::tuple<std::string>> got;
  auto failures = failures_of([&] { got = peek_from<std::string>(graphs, rec.actor); });
  EXPECT_FALSE(got);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("comes from"), std::string::npos) << failures[0];
  EXPECT_TRUE(peek_from<std::string>(other.actor, rec.actor)) << "still there, untouched";
}

TEST_F(FixtureSelfTest, ExpectReplyFailsOnAnErrorReplyAndOnTheWrongType) {
  inject(rec.actor, graphs, atom::dispatch_v, 1, 1, 1); // before plan: an error
  run_once(graphs);
  auto failures =
      failures_of([&] { EXPECT_FALSE(expect_reply<batch_descriptor>(graphs, rec.actor)); });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("replied with an error"), std::string::npos) << failures[0];
  inject(caf::actor_cast<caf::actor>(graphs), rec.actor, std::string{"not a descriptor"});
  failures = failures_of([&] { EXPECT_FALSE(expect_reply<batch_descriptor>(graphs, rec.actor)); });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("expected"), std::string::npos) << failures[0];
}

TEST_F(FixtureSelfTest, ExpectNoMessageFailsWhenSomethingWaits) {
  EXPECT_TRUE(expect_no_message(rec.actor));
  inject(other.actor, rec.actor, std::string{"late"});
  auto failures = failures_of([&] { EXPECT_FALSE(expect_no_message(rec.actor)); });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("late"), std::string::npos) << failures[0];
}

TEST_F(FixtureSelfTest, RecorderStoresRepliesAndErrors) {
  inject(rec.actor, graphs, atom::dispatch_v, 1, 1, 1);
  run_once(graphs);
  run_once(rec.actor);
  ASSERT_EQ(rec.log->errors.size(), 1u);
  EXPECT_EQ(rec.log->errors[0].category(), errc_category);
  inject(other.actor, rec.actor, std::string{"x"});
  run_all();
  ASSERT_NE(rec.log->last<std::string>(), nullptr);
  EXPECT_EQ(*rec.log->last<std::string>(), "x");
}

TEST_F(FixtureSelfTest, MockRankFailsTheTestOnAnUnscriptedMessage) {
  mock_rank_script script; // nothing scripted
  auto mock = track(spawn_mock_rank(sys, script));
  run_all();
  inject(rec.actor, mock.actor, atom::allocate_v, int64_t{4});
  auto failures = failures_of([&] { run_once(mock.actor); });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("unexpected allocate"), std::string::npos) << failures[0];
  EXPECT_EQ(mock.log->unexpected, 1);
  EXPECT_TRUE(expect_error(mock.actor, rec.actor)) << "and the sender gets an error";
}

} // namespace
} // namespace kvactor::test
