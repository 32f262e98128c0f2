// The seeded fault schedule of one message link (kvactor run --chaos SEED:RATE).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "actors/chaos/chaos_link.hpp"
#include "actors/driver/step_deadlines.hpp"

using namespace kvactor;
using ::testing::HasSubstr;

namespace {

std::vector<link_decision> draws(const chaos_spec& spec, uint64_t link, int n) {
  chaos_link l(spec, link);
  std::vector<link_decision> out;
  for (int i = 0; i < n; ++i)
    out.push_back(l.next());
  return out;
}

bool same(const std::vector<link_decision>& a, const std::vector<link_decision>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].fault != b[i].fault || a[i].delay != b[i].delay) return false;
  return true;
}

} // namespace

TEST(ChaosLink, OneSeedAndLinkGiveTheSameFaultsEveryTime) {
  const chaos_spec spec{42, 0.5};
  EXPECT_TRUE(same(draws(spec, 3, 200), draws(spec, 3, 200)));
  EXPECT_FALSE(same(draws(spec, 3, 200), draws(spec, 4, 200))) << "links differ";
  EXPECT_FALSE(same(draws(spec, 3, 200), draws({43, 0.5}, 3, 200))) << "seeds differ";
}

TEST(ChaosLink, RateZeroDeliversEverything) {
  chaos_link l({9, 0.0}, 0);
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(l.next().fault, link_fault::deliver);
  EXPECT_EQ(l.counts().messages, 1000);
  EXPECT_EQ(l.counts().dropped + l.counts().duplicated + l.counts().delayed, 0);
}

TEST(ChaosLink, DisturbsAboutRateOfTheMessagesSplitEvenlyAmongTheFaults) {
  chaos_link l({7, 0.3, std::chrono::microseconds(5000)}, 1);
  const int n = 30000;
  for (int i = 0; i < n; ++i) {
    const auto d = l.next();
    EXPECT_GE(d.delay.count(), 0);
    EXPECT_LT(d.delay.count(), 5000);
  }
  const auto& c = l.counts();
  const double disturbed = static_cast<double>(c.dropped + c.duplicated + c.delayed) / n;
  EXPECT_NEAR(disturbed, 0.3, 0.02);
  for (auto k : {c.dropped, c.duplicated, c.delayed})
    EXPECT_NEAR(static_cast<double>(k) / n, 0.1, 0.015);
}

TEST(ChaosLink, RateOneDisturbsEveryMessage) {
  chaos_link l({1, 1.0}, 0);
  for (int i = 0; i < 100; ++i)
    EXPECT_NE(l.next().fault, link_fault::deliver);
}

TEST(ChaosSpec, ParsesSeedAndRate) {
  auto s = parse_chaos_spec("7:0.25");
  ASSERT_TRUE(s) << s.err().message;
  EXPECT_EQ(s->seed, 7u);
  EXPECT_DOUBLE_EQ(s->rate, 0.25);
}

TEST(ChaosSpec, NamesThePartAtFault) {
  auto no_colon = parse_chaos_spec("7");
  ASSERT_FALSE(no_colon);
  EXPECT_THAT(no_colon.err().message, HasSubstr("expected SEED:RATE"));
  auto seed = parse_chaos_spec("x:0.1");
  ASSERT_FALSE(seed);
  EXPECT_THAT(seed.err().message, HasSubstr("SEED 'x' is not an unsigned integer"));
  for (const char* rate : {"1:1.5", "1:-0.1", "1:abc", "1:", "1:0.1x", "1:nan"}) {
    auto r = parse_chaos_spec(rate);
    ASSERT_FALSE(r) << rate;
    EXPECT_EQ(r.err().code, errc::invalid_argument);
    EXPECT_THAT(r.err().message, HasSubstr("is not a probability in [0, 1]")) << rate;
  }
}

TEST(StepDeadlines, ResendsAfterFourMediansOfTheRecentStepsWithinFloorAndCeiling) {
  using std::chrono::milliseconds;
  step_deadlines d;
  EXPECT_EQ(d.resend_after({}), milliseconds(20)) << "no step yet: the floor";
  EXPECT_EQ(d.resend_after({1.0, 2.0, 3.0}), milliseconds(20)) << "fast steps: the floor";
  EXPECT_EQ(d.resend_after({10.0, 100.0, 12.0}), milliseconds(48)) << "4 x median 12 ms";
  EXPECT_EQ(d.resend_after({900.0}), milliseconds(2000)) << "slow steps: the ceiling";
  std::vector<double> old_then_recent(20, 1000.0);
  for (int i = 0; i < 16; ++i)
    old_then_recent.push_back(10.0);
  EXPECT_EQ(d.resend_after(old_then_recent), milliseconds(40)) << "only the last 16 steps count";
}

TEST(ChaosLink, ALosslessLinkOnlyDelays) {
  chaos_link l({5, 0.5}, 2, link_kind::lossless);
  for (int i = 0; i < 2000; ++i) {
    const auto f = l.next().fault;
    EXPECT_TRUE(f == link_fault::deliver || f == link_fault::delay) << to_string(f);
  }
  EXPECT_EQ(l.counts().dropped + l.counts().duplicated, 0);
  EXPECT_GT(l.counts().delayed, 800);
}
