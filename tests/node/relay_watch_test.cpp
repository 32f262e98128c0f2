// The node's watchdog over relayed steps: at a relay's deadline its unanswered ranks are silent
// and its answer is given once; answered relays are never answered again and leave the watch.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "actors/node/relay_watch.hpp"

namespace kvactor {
namespace {

using clock_type = relay_watch::clock;
using namespace std::chrono_literals;

step_done done_by(int32_t rank, uint64_t seq) {
  step_done d;
  d.seq = seq;
  d.rank = rank;
  return d;
}

// A relay and what its `done` received.
struct watched_relay {
  std::shared_ptr<step_relay> relay;
  std::vector<node_step_done> answers;
};

watched_relay watch(relay_watch& w, clock_type::time_point deadline, uint64_t seq,
                    std::vector<int32_t> ranks) {
  watched_relay out{std::make_shared<step_relay>(seq, std::move(ranks)), {}};
  w.add(deadline, out.relay,
        [&answers = out.answers](node_step_done d) { answers.push_back(std::move(d)); });
  return out;
}

TEST(RelayWatch, RanksThatHaveNotAnsweredAtTheDeadlineAreSilentAndTheAnswerIsGivenOnce) {
  relay_watch w;
  const auto t0 = clock_type::now();
  auto r = watch(w, t0 + 10ms, 7, {0, 1, 2});
  EXPECT_FALSE(r.relay->on_done(1, done_by(1, 7)));
  w.expire(t0 + 10ms);
  ASSERT_EQ(r.answers.size(), 1u);
  EXPECT_EQ(r.answers[0].seq, 7u);
  ASSERT_EQ(r.answers[0].done.size(), 1u);
  EXPECT_EQ(r.answers[0].done[0].rank, 1);
  EXPECT_EQ(r.answers[0].silent, (std::vector<int32_t>{0, 2}));
  EXPECT_TRUE(r.relay->taken());
  w.expire(t0 + 20ms);
  EXPECT_EQ(r.answers.size(), 1u) << "answered twice";
  EXPECT_FALSE(w.next());
}

TEST(RelayWatch, NothingIsSilentBeforeItsDeadline) {
  relay_watch w;
  const auto t0 = clock_type::now();
  auto r = watch(w, t0 + 10ms, 7, {0});
  w.expire(t0 + 9ms);
  EXPECT_TRUE(r.answers.empty());
  EXPECT_FALSE(r.relay->taken());
  EXPECT_EQ(w.next(), t0 + 10ms);
}

TEST(RelayWatch, ARelayAnsweredByItsRanksIsNotAnsweredAgainAtItsDeadline) {
  relay_watch w;
  const auto t0 = clock_type::now();
  auto r = watch(w, t0 + 10ms, 7, {0});
  ASSERT_TRUE(r.relay->on_done(0, done_by(0, 7)));
  (void)r.relay->take(); // the actor's path: the answer went out with the rank's
  w.expire(t0 + 10ms);
  EXPECT_TRUE(r.answers.empty());
  EXPECT_EQ(w.size(), 0u);
}

TEST(RelayWatch, HoldsOnlyTheStepsInFlightWhenStepsAreAnsweredInOrder) {
  relay_watch w;
  const auto t0 = clock_type::now();
  std::vector<watched_relay> relays;
  relays.reserve(1000);
  for (uint64_t seq = 0; seq < 1000; ++seq) {
    relays.push_back(watch(w, t0 + 1s + seq * 1ms, seq, {0}));
    ASSERT_TRUE(relays.back().relay->on_done(0, done_by(0, seq)));
    (void)relays.back().relay->take();
  }
  EXPECT_LE(w.size(), 1u);
  EXPECT_FALSE(w.next()) << "every step was answered";
}

TEST(RelayWatch, TheEarliestWaitingDeadlineComesNextWhateverTheOrderOfAdding) {
  relay_watch w;
  const auto t0 = clock_type::now();
  auto late = watch(w, t0 + 30ms, 1, {0});
  auto early = watch(w, t0 + 10ms, 2, {0});
  EXPECT_EQ(w.next(), t0 + 10ms);
  w.expire(t0 + 10ms);
  EXPECT_EQ(early.answers.size(), 1u);
  EXPECT_TRUE(late.answers.empty());
  EXPECT_EQ(w.next(), t0 + 30ms);
}

} // namespace
} // namespace kvactor
