// The CPU communicator: sums in rank order on every rank; a missing rank is an error, not a hang.
#include <gtest/gtest.h>

#include <thread>

#include "kvactor/kernels/host_communicator.h"

using kvactor::kernels::host_communicator;

TEST(HostCommunicator, AllReduceGivesEveryRankTheSameSumRoundAfterRound) {
  constexpr int world = 4;
  host_communicator comm(world);
  std::vector<std::vector<float>> out(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      for (int round = 0; round < 50; ++round) {
        std::vector<float> buf{float(r + 1), float(round), 0.1f * float(r)};
        comm.all_reduce(r, buf.data(), buf.size());
        if (round == 49) out[static_cast<size_t>(r)] = buf;
      }
    });
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_FLOAT_EQ(out[static_cast<size_t>(r)][0], 10.0f);
    EXPECT_FLOAT_EQ(out[static_cast<size_t>(r)][1], 4 * 49.0f);
    // Bit-identical on every rank: one sum, in rank order.
    EXPECT_EQ(out[static_cast<size_t>(r)], out[0]);
  }
}

TEST(HostCommunicator, ARankThatNeverArrivesIsATimeoutError) {
  host_communicator comm(2, std::chrono::milliseconds(50));
  std::vector<float> buf{1.0f};
  EXPECT_THROW(comm.all_reduce(0, buf.data(), buf.size()), std::runtime_error);
}

TEST(HostCommunicator, AbortWakesAWaitingRankWithTheReason) {
  host_communicator comm(2);
  std::string what;
  std::thread waiter([&] {
    std::vector<float> buf{1.0f};
    try {
      comm.all_reduce(0, buf.data(), buf.size());
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  comm.abort("rank 1 failed its step");
  waiter.join();
  EXPECT_NE(what.find("rank 1 failed its step"), std::string::npos);
}

TEST(HostCommunicator, OneRankIsTheIdentity) {
  host_communicator comm(1);
  std::vector<float> buf{3.0f};
  comm.all_reduce(0, buf.data(), buf.size());
  EXPECT_EQ(buf[0], 3.0f);
}
