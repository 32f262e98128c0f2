// The host communicator: every collective on 1, 2 and 4 ranks gives every rank the same bits (a
// reduction in rank order), the ledger records each one, and a rank that is missing, stalls or
// enters another collective is an error naming it, never a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "collective_support.hpp"
#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/host_communicator.h"
#include "kvactor/comm/stalling_communicator.h"

namespace kvactor::comm {
namespace {

using namespace std::chrono_literals;
using comms_t = std::vector<std::shared_ptr<communicator>>;

comms_t make_group(int world, std::chrono::milliseconds timeout = 20s) {
  auto group = host_communicator::create_group(world, timeout);
  return {group.begin(), group.end()};
}

// Runs body(rank's communicator) on every rank, each on its own thread.
void on_every_rank(const comms_t& comms, const std::function<void(communicator&)>& body) {
  std::vector<std::thread> threads;
  for (const auto& c : comms)
    threads.emplace_back([&body, c] { body(*c); });
  for (auto& t : threads)
    t.join();
}

using test::catch_collective;
using test::caught;

// Whether rank c has entered a collective it has not left: its ledger's last entry is pending
// (a rank records a collective before it waits for its peers).
bool waiting_in_a_collective(const communicator& c) {
  const auto last = c.ledger().last(1);
  return !last.empty() && last.front().status == collective_status::pending;
}

// Polls `event` until it holds or `limit` passes; false if it never held. The communicator has
// no hook to block on, so this is how a test waits for "a rank is waiting in a collective".
bool wait_until(const std::function<bool()>& event, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!event()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

class HostCollectives : public ::testing::TestWithParam<int> {
protected:
  int world = GetParam();
  comms_t comms = make_group(world);
};

// Values whose float sum depends on the order of additions.
float value_of(int rank, size_t i) {
  const float big[] = {1e8f, 1.0f, -1e8f, 3.0f};
  return big[static_cast<size_t>(rank) % 4] + 0.25f * static_cast<float>(i) * float(rank + 1);
}

TEST_P(HostCollectives, AllReduceSumIsTheRankOrderSumBitForBitOnEveryRank) {
  constexpr size_t n = 257;
  std::vector<std::vector<float>> out(static_cast<size_t>(world));
  on_every_rank(comms, [&](communicator& c) {
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i)
      buf[i] = value_of(c.rank(), i);
    c.all_reduce(buf.data(), n);
    out[static_cast<size_t>(c.rank())] = buf;
  });
  for (size_t i = 0; i < n; ++i) {
    float want = value_of(0, i);
    for (int r = 1; r < world; ++r)
      want += value_of(r, i);
    EXPECT_EQ(out[0][i], want) << "element " << i;
  }
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(std::memcmp(out[static_cast<size_t>(r)].data(), out[0].data(), n * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
}

TEST_P(HostCollectives, AllReduceMinMaxAndInt64SumCombineEveryRank) {
  on_every_rank(comms, [&](communicator& c) {
    const auto r = static_cast<float>(c.rank());
    std::vector<float> lo{r, -r, 7.0f}, hi{r, -r, 7.0f};
    c.all_reduce(lo.data(), lo.size(), reduce_op::min);
    c.all_reduce(hi.data(), hi.size(), reduce_op::max);
    EXPECT_EQ(lo, (std::vector<float>{0.0f, -float(world - 1), 7.0f}));
    EXPECT_EQ(hi, (std::vector<float>{float(world - 1), -0.0f, 7.0f}));
    std::vector<int64_t> big{int64_t{1} << 40, c.rank()};
    c.all_reduce(big.data(), big.size(), reduce_op::sum);
    EXPECT_EQ(big, (std::vector<int64_t>{world * (int64_t{1} << 40), world * (world - 1) / 2}));
  });
}

TEST_P(HostCollectives, AgreeGivesEveryRankTheMinimumOrMaximum) {
  on_every_rank(comms, [&](communicator& c) {
    EXPECT_EQ(c.agree(1000 - c.rank(), reduce_op::min), 1000 - (world - 1));
    EXPECT_EQ(c.agree(1000 - c.rank(), reduce_op::max), 1000);
  });
}

TEST_P(HostCollectives, AllGatherPlacesRankRsElementsAtROffset) {
  on_every_rank(comms, [&](communicator& c) {
    const std::vector<int64_t> mine{10 * c.rank(), 10 * c.rank() + 1};
    std::vector<int64_t> all(2 * static_cast<size_t>(world), -1);
    c.all_gather(mine.data(), all.data(), mine.size(), collective_dtype::int64);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(all[2 * static_cast<size_t>(r)], 10 * r);
      EXPECT_EQ(all[2 * static_cast<size_t>(r) + 1], 10 * r + 1);
    }
  });
}

TEST_P(HostCollectives, BroadcastGivesEveryRankTheRootsElements) {
  for (int root = 0; root < world; ++root)
    on_every_rank(comms, [&](communicator& c) {
      std::vector<float> buf{float(c.rank()), 0.5f * float(c.rank())};
      c.broadcast(buf.data(), buf.size(), collective_dtype::float32, root);
      EXPECT_EQ(buf, (std::vector<float>{float(root), 0.5f * float(root)})) << "root " << root;
    });
}

TEST_P(HostCollectives, BarrierReturnsOnlyOnceEveryRankHasEnteredIt) {
  // The last rank arrives late on purpose, and provably so: it enters only once every other rank
  // is waiting in the barrier. So the others' EXPECTs run after a real wait, whatever the timing.
  std::atomic<int> entered{0};
  on_every_rank(comms, [&](communicator& c) {
    if (c.rank() == world - 1)
      for (int r = 0; r < world - 1; ++r)
        EXPECT_TRUE(wait_until([&] {
          return waiting_in_a_collective(*comms[static_cast<size_t>(r)]);
        })) << "rank "
            << r << " never entered the barrier";
    ++entered;
    c.barrier();
    EXPECT_EQ(entered.load(), world);
  });
}

TEST_P(HostCollectives, TheLedgerNumbersEveryCollectiveWithItsShapeAndOutcome) {
  on_every_rank(comms, [&](communicator& c) {
    std::vector<float> f(8, 1.0f);
    std::vector<int64_t> i(3, 1);
    std::vector<int64_t> gathered(3 * static_cast<size_t>(world));
    c.all_reduce(f.data(), f.size(), reduce_op::max);
    c.all_gather(i.data(), gathered.data(), i.size(), collective_dtype::int64);
    c.broadcast(f.data(), 5, collective_dtype::float32, 0);
    c.barrier();
    const auto entries = c.ledger().entries();
    ASSERT_EQ(entries.size(), 4u);
    EXPECT_EQ(entries[0], (collective_record{1, collective_kind::all_reduce, reduce_op::max,
                                             collective_dtype::float32, 8, 32, -1,
                                             collective_status::completed}));
    EXPECT_EQ(entries[1].kind, collective_kind::all_gather);
    EXPECT_EQ(entries[1].dtype, collective_dtype::int64);
    EXPECT_EQ(entries[1].bytes, 24u);
    EXPECT_EQ(entries[2].kind, collective_kind::broadcast);
    EXPECT_EQ(entries[2].root, 0);
    EXPECT_EQ(entries[2].count, 5u);
    EXPECT_EQ(entries[3].kind, collective_kind::barrier);
    for (size_t k = 0; k < entries.size(); ++k) {
      EXPECT_EQ(entries[k].seq, k + 1);
      EXPECT_EQ(entries[k].status, collective_status::completed);
    }
    EXPECT_EQ(c.ledger().next_seq(), 5u);
    EXPECT_EQ(describe(entries[0]), "all_reduce(max) #1 (8 float32, 32 bytes, completed)");
    EXPECT_EQ(describe(entries[3]), "barrier #4 (completed)");
  });
}

TEST_P(HostCollectives, ManyRoundsInARowStayInStep) {
  on_every_rank(comms, [&](communicator& c) {
    for (int round = 0; round < 200; ++round) {
      std::vector<float> buf{float(c.rank() + 1), float(round)};
      c.all_reduce(buf.data(), buf.size());
      ASSERT_EQ(buf[0], float(world * (world + 1) / 2));
      ASSERT_EQ(buf[1], float(world * round));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostCollectives, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(HostCommunicatorFailures, ARankThatNeverArrivesIsATimeoutNamingItWithTheLedger) {
  auto comms = make_group(2, 100ms);
  std::vector<float> buf{1.0f, 2.0f, 3.0f};
  const auto start = std::chrono::steady_clock::now();
  auto c = catch_collective([&] { comms[0]->all_reduce(buf.data(), buf.size()); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  ASSERT_TRUE(c.thrown);
  EXPECT_EQ(c.kind, collective_failure::timeout);
  EXPECT_NE(c.what.find("rank 0: all_reduce(sum) #1 of 3 float32 timed out after 0.1 s: rank(s) "
                        "1 did not enter it"),
            std::string::npos)
      << c.what;
  EXPECT_NE(c.what.find("this rank's last collectives: all_reduce(sum) #1 (3 float32, 12 bytes, "
                        "timed_out)"),
            std::string::npos)
      << c.what;
  // The group is aborted: the late rank fails at once, and leaves no ledger entry.
  auto late = catch_collective([&] { comms[1]->all_reduce(buf.data(), buf.size()); });
  EXPECT_EQ(late.kind, collective_failure::aborted);
  EXPECT_NE(late.what.find("did not enter it"), std::string::npos) << late.what;
  EXPECT_TRUE(comms[1]->ledger().entries().empty());
}

TEST(HostCommunicatorFailures, RanksEnteringDifferentCollectivesFailAtOnceNamingBoth) {
  auto comms = make_group(2, 30s);
  std::vector<caught> got(2);
  const auto start = std::chrono::steady_clock::now();
  on_every_rank(comms, [&](communicator& c) {
    std::vector<float> buf(4, 1.0f);
    got[static_cast<size_t>(c.rank())] = catch_collective([&] {
      if (c.rank() == 0)
        c.all_reduce(buf.data(), buf.size());
      else
        c.broadcast(buf.data(), buf.size(), collective_dtype::float32, 0);
    });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "a mismatch must not wait out 30 s";
  ASSERT_TRUE(got[0].thrown && got[1].thrown);
  const auto& second = got[0].kind == collective_failure::mismatch ? got[0] : got[1];
  EXPECT_EQ(second.kind, collective_failure::mismatch);
  EXPECT_NE(second.what.find("collective mismatch"), std::string::npos) << second.what;
  EXPECT_NE(second.what.find("all_reduce(sum) #1 of 4 float32"), std::string::npos) << second.what;
  EXPECT_NE(second.what.find("broadcast(root 0) #1 of 4 float32"), std::string::npos)
      << second.what;
}

TEST(HostCommunicatorFailures, AbortWakesAWaitingRankWithTheReason) {
  auto comms = make_group(2);
  caught c;
  std::thread waiter([&] {
    std::vector<float> buf{1.0f};
    c = catch_collective([&] { comms[0]->all_reduce(buf.data(), buf.size()); });
  });
  // Abort only once rank 0 waits in the all-reduce, so that the abort wakes a waiting rank.
  const bool waiting = wait_until([&] { return waiting_in_a_collective(*comms[0]); });
  comms[1]->abort("rank 1 failed its step");
  waiter.join();
  ASSERT_TRUE(waiting) << "rank 0 never entered the all-reduce";
  EXPECT_EQ(c.kind, collective_failure::aborted);
  EXPECT_NE(c.what.find("rank 1 failed its step"), std::string::npos) << c.what;
  EXPECT_EQ(comms[0]->ledger().entries().back().status, collective_status::aborted);
  EXPECT_TRUE(comms[0]->aborted());
}

TEST(HostCommunicatorFailures, AStalledRankIsOneCollectiveBehindItsTimedOutPeers) {
  auto group = make_group(2, 200ms);
  comms_t comms{group[0], make_stalling_communicator(group[1], 2, 10s)};
  std::vector<caught> got(2);
  const auto start = std::chrono::steady_clock::now();
  on_every_rank(comms, [&](communicator& c) {
    got[static_cast<size_t>(c.rank())] = catch_collective([&] {
      for (int i = 0; i < 3; ++i) {
        std::vector<float> buf{1.0f};
        c.all_reduce(buf.data(), buf.size());
      }
    });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the stall ends with the abort";
  EXPECT_EQ(got[0].kind, collective_failure::timeout);
  EXPECT_NE(got[0].what.find("rank(s) 1 did not enter it"), std::string::npos) << got[0].what;
  EXPECT_EQ(got[1].kind, collective_failure::aborted);
  const auto l0 = comms[0]->ledger().entries();
  const auto l1 = comms[1]->ledger().entries();
  ASSERT_EQ(l0.size(), 2u);
  EXPECT_EQ(l0[1].status, collective_status::timed_out);
  ASSERT_EQ(l1.size(), 1u) << "the stalled rank never entered #2";
  EXPECT_EQ(l1[0].status, collective_status::completed);
}

TEST(HostCommunicatorFailures, BadArgumentsAreRejectedBeforeAnythingWaits) {
  EXPECT_THROW(host_communicator::create_group(0), std::invalid_argument);
  EXPECT_THROW(host_communicator::create_group(2, 0ms), std::invalid_argument);
  auto comms = make_group(2, 50ms);
  std::vector<float> buf{1.0f};
  auto c =
      catch_collective([&] { comms[0]->broadcast(buf.data(), 1, collective_dtype::float32, 2); });
  EXPECT_EQ(c.kind, collective_failure::invalid_argument);
  EXPECT_NE(c.what.find("root 2 is outside [0, 2)"), std::string::npos) << c.what;
  EXPECT_TRUE(comms[0]->ledger().entries().empty());
}

TEST(CollectiveLedger, KeepsTheMostRecentEntriesAndNeverRestartsNumbering) {
  collective_ledger ledger(3);
  for (int i = 0; i < 5; ++i)
    ledger.finish(
        ledger.enter(collective_kind::all_reduce, reduce_op::sum, collective_dtype::float32, 16),
        collective_status::completed);
  auto seq = ledger.enter(collective_kind::barrier, reduce_op::sum, collective_dtype::int64, 0);
  EXPECT_EQ(seq, 6u);
  auto entries = ledger.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries.front().seq, 4u);
  EXPECT_EQ(entries.back().status, collective_status::pending);
  EXPECT_EQ(ledger.tail(2), "this rank's last collectives: all_reduce(sum) #5 (16 float32, 64 "
                            "bytes, completed); barrier #6 (pending)");
  ledger.finish_pending(collective_status::aborted);
  EXPECT_EQ(ledger.last(1).front().status, collective_status::aborted);
  EXPECT_EQ(collective_ledger{}.tail(), "no collective entered yet");
}

} // namespace
} // namespace kvactor::comm
