// The device-local communicator: several ranks on one GPU, each on its own thread and stream.
// Every collective gives every rank the bits the host communicator's rank-order reduction gives;
// a mismatch, a rank that never comes and an abort end the collective with an error that says
// so, never a hang. Argument checks run everywhere; the rest skips with "no CUDA device: ...".
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "../deploy/cli_support.hpp"
#include "../kernels/collective_support.hpp"
#include "gpu_support.hpp"
#include "kernels/comm/rank_order_reduce.h"
#include "kvactor/kernels/collective_ledger.h"
#include "kvactor/kernels/device_local_communicator.h"

namespace kvactor::kernels {
namespace {

using namespace std::chrono_literals;
using gpu_test::device_array;
using test::catch_collective;

using group = std::vector<std::shared_ptr<communicator>>;

// Runs body(rank) on one thread per rank (the device current on each) and joins them.
void on_every_rank(const group& g, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(g.size()); ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      body(r);
    });
  for (auto& t : threads)
    t.join();
}

template <class T>
std::vector<T> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>)
      x = std::uniform_real_distribution<T>(-1e3f, 1e3f)(rng);
    else
      x = static_cast<T>(rng()) << 20;
  }
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST(DeviceLocalCommunicator, BadArgumentsAreRejectedBeforeAnyCudaCall) {
  std::string why;
  if (!device_local_available(&why)) {
    auto c = catch_collective([] { make_device_local_group(2, 0, 1s); });
    EXPECT_EQ(c.kind, collective_failure::transport);
    EXPECT_NE(c.what.find("without CUDA"), std::string::npos) << c.what;
    return;
  }
  auto c = catch_collective([] { make_device_local_group(9, 0, 1s); });
  EXPECT_EQ(c.kind, collective_failure::invalid_argument);
  EXPECT_NE(c.what.find("world_size: 9 is outside [1, 8]"), std::string::npos) << c.what;
  c = catch_collective([] { make_device_local_group(2, 0, 0s); });
  EXPECT_EQ(c.kind, collective_failure::invalid_argument);
  EXPECT_NE(c.what.find("timeout"), std::string::npos) << c.what;
}

template <class T>
void check_all_reduce(int world, reduce_op op, size_t n) {
  auto g = make_device_local_group(world, 0, 30s);
  std::vector<std::vector<T>> inputs;
  std::vector<const void*> views;
  for (int r = 0; r < world; ++r)
    inputs.push_back(random_values<T>(n, 100u + static_cast<unsigned>(r)));
  for (const auto& in : inputs)
    views.push_back(in.data());
  std::vector<T> expected(n);
  detail::reduce_in_rank_order<T>(views, n, op, reinterpret_cast<std::byte*>(expected.data()));
  std::vector<std::vector<T>> results(static_cast<size_t>(world));
  on_every_rank(g, [&](int r) {
    device_array<T> buf(inputs[static_cast<size_t>(r)]);
    g[static_cast<size_t>(r)]->all_reduce(buf.get(), n,
                                          std::is_same_v<T, float> ? collective_dtype::float32
                                                                   : collective_dtype::int64,
                                          op, nullptr);
    g[static_cast<size_t>(r)]->synchronize();
    results[static_cast<size_t>(r)] = buf.download();
  });
  for (int r = 0; r < world; ++r)
    EXPECT_TRUE(same_bits(results[static_cast<size_t>(r)], expected))
        << "rank " << r << " of " << world << ", " << to_string(op);
  for (const auto& c : g) {
    const auto last = c->ledger().last(1);
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].status, collective_status::completed);
  }
}

TEST(DeviceLocalCommunicator, AllReduceGivesEveryRankTheHostCommunicatorsBits) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  for (int world : {1, 2, 3, 4, 8}) {
    check_all_reduce<float>(world, reduce_op::sum, 100'003);
    if (HasFatalFailure()) return;
  }
  check_all_reduce<float>(4, reduce_op::max, 4099);
  check_all_reduce<float>(4, reduce_op::min, 4099);
  check_all_reduce<int64_t>(4, reduce_op::sum, 4099);
}

TEST(DeviceLocalCommunicator, AllGatherAndBroadcastReachEveryRank) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  constexpr int world = 4;
  constexpr size_t n = 1000;
  auto g = make_device_local_group(world, 0, 30s);
  std::vector<std::vector<float>> gathered(world), broadcast(world);
  on_every_rank(g, [&](int r) {
    device_array<float> send(std::vector<float>(n, static_cast<float>(r + 1)));
    device_array<float> recv(n * world);
    auto& c = *g[static_cast<size_t>(r)];
    c.all_gather(send.get(), recv.get(), n, collective_dtype::float32, nullptr);
    device_array<float> b(random_values<float>(n, 7u + static_cast<unsigned>(r)));
    c.broadcast(b.get(), n, collective_dtype::float32, 2, nullptr);
    c.synchronize();
    gathered[static_cast<size_t>(r)] = recv.download();
    broadcast[static_cast<size_t>(r)] = b.download();
  });
  const auto from_root = random_values<float>(n, 7u + 2u);
  for (int r = 0; r < world; ++r) {
    for (int s = 0; s < world; ++s)
      EXPECT_EQ(gathered[r][static_cast<size_t>(s) * n + 17], static_cast<float>(s + 1))
          << "rank " << r << " slot " << s;
    EXPECT_TRUE(same_bits(broadcast[static_cast<size_t>(r)], from_root)) << "rank " << r;
  }
}

TEST(DeviceLocalCommunicator, RanksThatEnterDifferentCollectivesBothFailNamingThem) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto g = make_device_local_group(2, 0, 30s);
  std::vector<test::caught> caught(2);
  on_every_rank(g, [&](int r) {
    device_array<float> buf(r == 0 ? 8 : 16);
    caught[static_cast<size_t>(r)] =
        catch_collective([&] { g[static_cast<size_t>(r)]->all_reduce(buf.get(), buf.size()); });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(caught[r].kind, collective_failure::mismatch) << caught[r].what;
    EXPECT_NE(caught[r].what.find("rank 1 entered all_reduce(sum) #1 (16 float32"),
              std::string::npos)
        << caught[r].what;
  }
  EXPECT_TRUE(g[0]->aborted());
}

TEST(DeviceLocalCommunicator, ARankThatNeverEntersIsNamedWhenTheTimeoutPasses) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto g = make_device_local_group(2, 0, 300ms);
  device_array<float> buf(64);
  const auto start = std::chrono::steady_clock::now();
  auto c = catch_collective([&] { g[0]->all_reduce(buf.get(), 64); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(c.kind, collective_failure::timeout) << c.what;
  EXPECT_NE(c.what.find("rank(s) 1 did not enter it"), std::string::npos) << c.what;
  EXPECT_EQ(g[0]->ledger().last(1).front().status, collective_status::timed_out);
  // The peer that comes late finds the group aborted, at once.
  auto late = catch_collective([&] { g[1]->all_reduce(buf.get(), 64); });
  EXPECT_EQ(late.kind, collective_failure::aborted) << late.what;
}

TEST(DeviceLocalCommunicator, AnAbortWakesAPeerWaitingToMeet) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto g = make_device_local_group(2, 0, 60s);
  test::caught waiting;
  std::thread t([&] {
    cudaSetDevice(0);
    device_array<float> buf(64);
    waiting = catch_collective([&] { g[0]->all_reduce(buf.get(), 64); });
  });
  // Wait on the event (rank 0 entered), not on a sleep.
  while (g[0]->ledger().next_seq() == 1)
    std::this_thread::yield();
  g[1]->abort("rank 1 failed its step");
  t.join();
  EXPECT_EQ(waiting.kind, collective_failure::aborted) << waiting.what;
  EXPECT_NE(waiting.what.find("rank 1 failed its step"), std::string::npos) << waiting.what;
}

TEST(DeviceLocalCommunicator, AgreeAndBarrierMeetOnTheHost) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto g = make_device_local_group(3, 0, 30s);
  std::vector<int64_t> agreed(3);
  on_every_rank(g, [&](int r) {
    g[static_cast<size_t>(r)]->barrier();
    agreed[static_cast<size_t>(r)] = g[static_cast<size_t>(r)]->agree(100 + r, reduce_op::min);
  });
  EXPECT_EQ(agreed, (std::vector<int64_t>{100, 100, 100}));
}

// ---- kvactor run with ranks sharing the GPU -------------------------------------------------

::kvactor::test::cli_result run_shared(const std::vector<std::string>& extra) {
  std::vector<std::string> args{
      "run",           "--device",          "cuda",  "--seed", "11", "--requests", "12",
      "--no-progress", "--kv-cache-memory", "256MiB"};
  args.insert(args.end(), extra.begin(), extra.end());
  return ::kvactor::test::run_cli(std::move(args));
}

TEST(GpuRanksSharingAGpu, TwoAndFourRanksOnOneGpuServeEveryRequest) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  for (const auto& [tp, ids] :
       std::vector<std::pair<std::string, std::string>>{{"2", "0,0"}, {"4", "0,0,0,0"}}) {
    auto r = run_shared({"--tensor-parallel-size", tp, "--gpu-ids", ids});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("(" + tp + " rank(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("12 finished, 0 failed"), std::string::npos) << r.out;
  }
}

// Free device memory now (the process's view of the GPU: every rank of a run lives in it).
size_t free_device_bytes() {
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return free;
}

TEST(GpuRanksSharingAGpu, AStalledRankIsNamedWithinTheTimeoutAndNoRequestIsLost) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  // A run that succeeds first, so that what stays for the process (CUDA context, cuBLAS and
  // kernel modules) is loaded before the baseline.
  ASSERT_EQ(run_shared({"--tensor-parallel-size", "2", "--gpu-ids", "0,0"}).code, 0);
  const size_t baseline = free_device_bytes();
  const auto started = std::chrono::steady_clock::now();
  auto r = run_shared({"--tensor-parallel-size", "2", "--gpu-ids", "0,0", "--collective-timeout",
                       "0.5", "--debug-stall", "1:10"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("rank(s) 1 did not enter it"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("0 finished, 12 failed"), std::string::npos) << r.out;
  // The failed group gave its device memory back: each rank held 256 MiB of KV cache alone.
  EXPECT_GE(free_device_bytes() + (size_t{64} << 20), baseline)
      << "the failed run left " << (baseline - free_device_bytes()) / (1 << 20) << " MiB in use";
}

} // namespace
} // namespace kvactor::kernels
