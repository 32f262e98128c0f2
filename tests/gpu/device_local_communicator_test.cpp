// The device-local communicator: several ranks on one GPU, each on its own thread and stream.
// Every collective gives every rank the bits the host communicator's rank-order reduction gives,
// eagerly or captured into a CUDA graph and launched again and again (in rounds smaller than the
// collective too); a mismatch, a rank that never comes and an abort end the collective with an
// error that says so, never a hang. Argument checks run everywhere; the rest skips with "no CUDA
// device: ...".
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "../comm/collective_support.hpp"
#include "../deploy/cli_support.hpp"
#include "../support/sanitizer_slowdown.hpp"
#include "comm/rank_order_reduce.h"
#include "gpu_support.hpp"
#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/device_local_communicator.h"

namespace kvactor::comm {
namespace {

using namespace std::chrono_literals;
using kernels::gpu_test::device_array;
using ::kvactor::test::test_slowdown;
using test::catch_collective;

using group = std::vector<std::shared_ptr<communicator>>;

// The groups' timeout where a test checks what the collectives compute, not how long a wait may
// last: scaled like every bound, since under compute-sanitizer a wait between the ranks' threads
// outlasted a fixed 30 s with nothing wrong.
std::chrono::milliseconds group_timeout() {
  return std::chrono::milliseconds(30s) * test_slowdown();
}

// Runs body(rank) on one thread per rank (the device current on each) and joins them; a
// collective error a body did not expect fails the test (not the process).
void on_every_rank(const group& g, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(g.size()); ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      try {
        body(r);
      } catch (const collective_error& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
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
  c = catch_collective([] { make_device_local_group(2, 0, 1s, 1000); });
  EXPECT_EQ(c.kind, collective_failure::invalid_argument);
  EXPECT_NE(c.what.find("slot_bytes: 1000 is not a positive multiple of 256"), std::string::npos)
      << c.what;
}

template <class T>
void check_all_reduce(int world, reduce_op op, size_t n) {
  auto g = make_device_local_group(world, 0, group_timeout());
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
  auto g = make_device_local_group(world, 0, group_timeout());
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
  auto g = make_device_local_group(2, 0, group_timeout());
  std::vector<test::caught> caught(2);
  on_every_rank(g, [&](int r) {
    device_array<float> buf(r == 0 ? 8 : 16);
    auto& c = *g[static_cast<size_t>(r)];
    caught[static_cast<size_t>(r)] = catch_collective([&] {
      c.all_reduce(buf.get(), buf.size());
      c.synchronize(); // found on the device: reported when the rank waits for its collectives
    });
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
  auto c = catch_collective([&] {
    g[0]->all_reduce(buf.get(), 64);
    g[0]->synchronize();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s * test_slowdown());
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
    waiting = catch_collective([&] {
      g[0]->all_reduce(buf.get(), 64);
      g[0]->synchronize();
    });
  });
  // Wait on the event (rank 0 entered), not on a sleep.
  while (g[0]->ledger().next_seq() == 1)
    std::this_thread::yield();
  g[1]->abort("rank 1 failed its step");
  t.join();
  EXPECT_EQ(waiting.kind, collective_failure::aborted) << waiting.what;
  EXPECT_NE(waiting.what.find("rank 1 failed its step"), std::string::npos) << waiting.what;
}

TEST(DeviceLocalCommunicator, AgreeGatherAndBarrierMeetOnTheHost) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto g = make_device_local_group(3, 0, group_timeout());
  std::vector<int64_t> agreed(3);
  std::vector<std::vector<int64_t>> gathered(3);
  on_every_rank(g, [&](int r) {
    auto& c = *g[static_cast<size_t>(r)];
    c.barrier();
    agreed[static_cast<size_t>(r)] = c.agree(100 + r, reduce_op::min);
    gathered[static_cast<size_t>(r)] = c.gather({r, 10 * r});
  });
  EXPECT_EQ(agreed, (std::vector<int64_t>{100, 100, 100}));
  for (const auto& v : gathered)
    EXPECT_EQ(v, (std::vector<int64_t>{0, 0, 1, 10, 2, 20}));
}

// ---- collectives inside CUDA graphs ---------------------------------------------------------

// One rank's graph of one all_reduce over `buf` on `stream`, and what it captured.
struct captured_all_reduce {
  cudaGraphExec_t exec = nullptr;
  std::vector<collective_record> collectives;
  ~captured_all_reduce() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
};

void capture_all_reduce(communicator& c, float* buf, size_t n, cudaStream_t stream,
                        captured_all_reduce& out) {
  const auto before = c.ledger().next_seq();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  c.all_reduce(buf, n, reduce_op::sum, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&out.exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  out.collectives = c.take_captured();
  EXPECT_EQ(c.ledger().next_seq(), before) << "a captured collective runs at launch, not now";
  ASSERT_EQ(out.collectives.size(), 1u);
  EXPECT_EQ(out.collectives[0].count, n);
}

TEST(DeviceLocalCommunicator, ACapturedAllReduceSumsEachLaunchsInputsLikeAnEagerOne) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  constexpr int world = 3;
  constexpr int launches = 4;
  constexpr size_t n = 5000; // 2 KiB slots: 512 floats a round, 10 rounds
  auto g = make_device_local_group(world, 0, group_timeout(), 2048);
  auto input = [](int r, int launch) {
    return random_values<float>(n, 1000u + 10u * static_cast<unsigned>(launch) + r);
  };
  std::vector<std::vector<std::vector<float>>> results(world);
  // Under compute-sanitizer a stream synchronize seems to wait for more than its stream: one
  // rank's, its own collectives complete, did not return for over 9 minutes while a peer's next
  // launch spun on the device for that rank's, and another rank sat blocked in cudaEventRecord
  // (seen on an H100 under racecheck). There the ranks end each launch together; plainly they
  // drift, one launching its next graph while a peer still waits for the last.
  const bool in_step = ::kvactor::test::slowed_run();
  std::barrier launch_done(world);
  on_every_rank(g, [&](int r) {
    // A rank that stops early (a failed assertion, an error) leaves the barrier, never hangs it.
    const std::unique_ptr<std::barrier<>, void (*)(std::barrier<>*)> leave(
        in_step ? &launch_done : nullptr, [](std::barrier<>* b) { b->arrive_and_drop(); });
    auto& c = *g[static_cast<size_t>(r)];
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    device_array<float> buf(n);
    captured_all_reduce graph;
    capture_all_reduce(c, buf.get(), n, stream, graph);
    // Launched graphs wait for their peers on the device, and an allocation waits for the whole
    // device: every rank allocates before any launches.
    c.barrier();
    for (int launch = 0; launch < launches; ++launch) {
      const auto in = input(r, launch);
      ASSERT_EQ(
          cudaMemcpyAsync(buf.get(), in.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream),
          cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(graph.exec, stream), cudaSuccess);
      c.replayed(graph.collectives, stream);
      // An eager collective between launches keeps the ranks' rounds in step.
      if (launch == 1) c.all_reduce(buf.get(), 7, reduce_op::max, stream);
      c.synchronize();
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      results[static_cast<size_t>(r)].push_back(buf.download());
      if (in_step) launch_done.arrive_and_wait();
    }
    cudaStreamDestroy(stream);
  });
  for (int launch = 0; launch < launches; ++launch) {
    std::vector<std::vector<float>> inputs;
    std::vector<const void*> views;
    for (int r = 0; r < world; ++r)
      inputs.push_back(input(r, launch));
    for (const auto& in : inputs)
      views.push_back(in.data());
    std::vector<float> expected(n);
    detail::reduce_in_rank_order<float>(views, n, reduce_op::sum,
                                        reinterpret_cast<std::byte*>(expected.data()));
    // (launch 1's eager max over the first 7 sums leaves them: every rank holds the same.)
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(results[static_cast<size_t>(r)].size(), static_cast<size_t>(launches));
      EXPECT_TRUE(same_bits(results[static_cast<size_t>(r)][static_cast<size_t>(launch)], expected))
          << "rank " << r << ", launch " << launch;
    }
  }
  // Every launch entered its collective into the ledger, completed: the barrier, 4 launches and
  // 1 eager all-reduce.
  for (const auto& c : g) {
    const auto entries = c->ledger().entries();
    ASSERT_EQ(entries.size(), 6u);
    for (const auto& e : entries)
      EXPECT_EQ(e.status, collective_status::completed) << describe(e);
  }
}

TEST(DeviceLocalCommunicator, CapturedGatherAndBroadcastRunInRoundsSmallerThanThem) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  constexpr int world = 3;
  constexpr size_t n = 700; // 1 KiB slots: 256 floats a round, 3 rounds
  auto g = make_device_local_group(world, 0, group_timeout(), 1024);
  std::vector<std::vector<float>> gathered(world), broadcast(world);
  on_every_rank(g, [&](int r) {
    auto& c = *g[static_cast<size_t>(r)];
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    device_array<float> send(random_values<float>(n, 50u + static_cast<unsigned>(r)));
    device_array<float> recv(n * world);
    device_array<float> b(random_values<float>(n, 7u + static_cast<unsigned>(r)));
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    c.all_gather(send.get(), recv.get(), n, collective_dtype::float32, stream);
    c.broadcast(b.get(), n, collective_dtype::float32, 1, stream);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    cudaGraphDestroy(graph);
    const auto collectives = c.take_captured();
    EXPECT_EQ(collectives.size(), 2u);
    c.barrier(); // every rank allocated before any launch waits on the device
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    c.replayed(collectives, stream);
    c.synchronize();
    gathered[static_cast<size_t>(r)] = recv.download();
    broadcast[static_cast<size_t>(r)] = b.download();
    cudaGraphExecDestroy(exec);
    cudaStreamDestroy(stream);
  });
  const auto from_root = random_values<float>(n, 7u + 1u);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(gathered[static_cast<size_t>(r)].size(), n * world);
    for (int s = 0; s < world; ++s) {
      const auto sent = random_values<float>(n, 50u + static_cast<unsigned>(s));
      const std::vector<float> got(gathered[static_cast<size_t>(r)].begin() + s * n,
                                   gathered[static_cast<size_t>(r)].begin() + (s + 1) * n);
      EXPECT_TRUE(same_bits(got, sent)) << "rank " << r << " slot " << s;
    }
    EXPECT_TRUE(same_bits(broadcast[static_cast<size_t>(r)], from_root)) << "rank " << r;
  }
}

TEST(DeviceLocalCommunicator, AGraphLaunchWhosePeerNeverComesTimesOutOnTheDeviceNamingIt) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto g = make_device_local_group(2, 0, 300ms);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  device_array<float> buf(64);
  buf.fill_bytes(0); // what the all-reduce reads: initcheck flagged it unwritten
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); // before the non-blocking stream reads it
  captured_all_reduce graph;
  capture_all_reduce(*g[0], buf.get(), 64, stream, graph);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(cudaGraphLaunch(graph.exec, stream), cudaSuccess);
  auto c = catch_collective([&] {
    g[0]->replayed(graph.collectives, stream);
    g[0]->synchronize();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s * test_slowdown());
  EXPECT_EQ(c.kind, collective_failure::timeout) << c.what;
  EXPECT_NE(c.what.find("rank(s) 1 did not enter it"), std::string::npos) << c.what;
  EXPECT_EQ(g[0]->ledger().last(1).front().status, collective_status::timed_out);
  // The stream is free again: the wait ended on the device, nothing hangs.
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
}

// ---- kvactor run with ranks sharing the GPU -------------------------------------------------

// A `--collective-timeout` of `seconds` times the slowdown of a tool around the process: under
// racecheck a collective's kernels outlast the plain value although no rank stalls (on an H100
// 0.5 s expired before the stalled rank reached its stall, and 10 s in a run with no stall), and
// these tests check what a timeout does, not its length.
std::string timeout_seconds(double seconds) {
  return std::to_string(seconds * test_slowdown());
}

::kvactor::test::cli_result run_shared(const std::vector<std::string>& extra, int requests = 12) {
  std::vector<std::string> args{"run",           "--device",          "cuda",   "--seed",    "11",
                                "--no-progress", "--kv-cache-memory", "256MiB", "--requests"};
  args.push_back(std::to_string(requests));
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
// compute-sanitizer's initcheck takes 96-128 MiB more of it with each run in the process (its own
// bookkeeping: memcheck and runs without a tool pass), so the checks below fail under initcheck.
size_t free_device_bytes() {
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return free;
}

// Eager steps: rank 1 stops before its 10th collective, in the first steps.
TEST(GpuRanksSharingAGpu, AStalledRankIsNamedWithinTheTimeoutAndNoRequestIsLost) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const std::vector<std::string> eager{"--tensor-parallel-size", "2",   "--gpu-ids", "0,0",
                                       "--cudagraph-mode",       "none"};
  // A run that succeeds first, so that what stays for the process (CUDA context, cuBLAS and
  // kernel modules) is loaded before the baseline.
  ASSERT_EQ(run_shared(eager).code, 0);
  const size_t baseline = free_device_bytes();
  const auto started = std::chrono::steady_clock::now();
  auto stalled = eager;
  stalled.insert(stalled.end(),
                 {"--collective-timeout", timeout_seconds(0.5), "--debug-stall", "1:10"});
  auto r = run_shared(stalled);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s * test_slowdown());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("rank(s) 1 did not enter it"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("0 finished, 12 failed"), std::string::npos) << r.out;
  // The failed group gave its device memory back: each rank held 256 MiB of KV cache alone.
  EXPECT_GE(free_device_bytes() + (size_t{64} << 20), baseline)
      << "the failed run left " << (baseline - free_device_bytes()) / (1 << 20) << " MiB in use";
}

// With graphs, collective #10 falls in the warm-up before capture: the peer waiting on the device
// names rank 1 within the timeout and the run ends, its device memory freed.
TEST(GpuRanksSharingAGpu, ARankStalledBeforeItsGraphsAreCapturedIsNamedWithinTheTimeout) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const std::vector<std::string> graphs{
      "--tensor-parallel-size", "2", "--gpu-ids", "0,0", "--cudagraph-mode", "full_and_piecewise"};
  ASSERT_EQ(run_shared(graphs).code, 0);
  const size_t baseline = free_device_bytes();
  const auto started = std::chrono::steady_clock::now();
  auto stalled = graphs;
  stalled.insert(stalled.end(),
                 {"--collective-timeout", timeout_seconds(0.5), "--debug-stall", "1:10"});
  auto r = run_shared(stalled);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s * test_slowdown());
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("rank(s) 1 did not enter it"), std::string::npos) << r.err;
  EXPECT_GE(free_device_bytes() + (size_t{64} << 20), baseline)
      << "the failed run left " << (baseline - free_device_bytes()) / (1 << 20) << " MiB in use";
}

// A run with graphs: its exit, output and summary (when it succeeded).
struct graph_run {
  ::kvactor::test::cli_result cli;
  nlohmann::json summary;
};

graph_run run_with_graphs(const std::string& tag, const std::vector<std::string>& extra,
                          int requests = 12) {
  const auto path = ::testing::TempDir() + "tp_graphs_" + tag + ".json";
  std::vector<std::string> args{"--summary-json", path};
  args.insert(args.end(), extra.begin(), extra.end());
  graph_run r{run_shared(args, requests), {}};
  if (r.cli.code == 0) {
    std::ifstream in(path);
    r.summary = nlohmann::json::parse(in);
  }
  return r;
}

int64_t replays_of(const graph_run& r) {
  return r.summary["graphs"]["replays"].get<int64_t>();
}

// Every request's tokens in two runs: the share of requests whose outputs are identical.
double identical_outputs(const nlohmann::json& a, const nlohmann::json& b) {
  const auto& x = a["outputs"];
  const auto& y = b["outputs"];
  if (x.size() != y.size() || x.empty()) return 0;
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i)
    same += x[i]["tokens"] == y[i]["tokens"];
  return static_cast<double>(same) / static_cast<double>(x.size());
}

// Tensor-parallel GPU ranks capture FULL and PIECEWISE graphs with their all-reduces inside and
// replay them. A replay pads a batch to a captured size, so its greedy tokens may flip on a
// near-tie against an eager run (GpuRank's bound: the graph runner's replays themselves equal
// their eager steps bit for bit, GraphRunner.TensorParallel...); most outputs are identical.
TEST(GpuRanksSharingAGpu, TensorParallelRanksReplayGraphsWithTheirAllReducesInside) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  for (const auto& [tp, ids] :
       std::vector<std::pair<std::string, std::string>>{{"2", "0,0"}, {"4", "0,0,0,0"}}) {
    const std::vector<std::string> group{"--tensor-parallel-size", tp, "--gpu-ids", ids};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), group.begin(), group.end());
      return more;
    };
    auto eager = run_with_graphs("eager" + tp, with({"--cudagraph-mode", "none"}));
    ASSERT_EQ(eager.cli.code, 0) << eager.cli.err;
    auto graphs = run_with_graphs("graphs" + tp, with({"--cudagraph-mode", "full_and_piecewise"}));
    ASSERT_EQ(graphs.cli.code, 0) << graphs.cli.err;
    EXPECT_NE(graphs.cli.out.find("12 finished, 0 failed"), std::string::npos) << graphs.cli.out;
    const auto steps = graphs.summary["steps"].get<int64_t>();
    EXPECT_GT(replays_of(graphs), steps / 2) << "TP " << tp << ": most steps have a graph";
    EXPECT_EQ(replays_of(eager), 0);
    const double same = identical_outputs(graphs.summary, eager.summary);
    std::printf("TP %s on one GPU: %lld of %lld steps replayed; %.0f%% of outputs identical to "
                "the eager run\n",
                tp.c_str(), static_cast<long long>(replays_of(graphs)),
                static_cast<long long>(steps), 100 * same);
    EXPECT_GE(same, 0.5) << "TP " << tp;
  }
}

TEST(GpuRanksSharingAGpu, AGraphOneRankCannotCaptureRunsEagerlyOnEveryRank) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  // One graph (PIECEWISE, 512 tokens): without the fault the ranks replay it; when rank 1's
  // capture of it fails, both drop it and every step runs eagerly, together: no mismatch, no
  // timeout, every request served.
  const std::vector<std::string> one_graph{
      "--tensor-parallel-size",    "2",  "--gpu-ids", "0,0", "--cudagraph-mode", "piecewise",
      "--cudagraph-capture-sizes", "512"};
  // Under a tool, 4 requests instead of 12: under racecheck the run of 12 took 10 minutes.
  const int requests = ::kvactor::test::slowed_run() ? 4 : 12;
  const std::string served = std::to_string(requests) + " finished, 0 failed";
  auto fine = run_with_graphs("one_graph", one_graph, requests);
  ASSERT_EQ(fine.cli.code, 0) << fine.cli.err;
  EXPECT_NE(fine.cli.out.find(served), std::string::npos) << fine.cli.out;
  EXPECT_GT(replays_of(fine), 0);
  auto faulty = one_graph;
  faulty.insert(faulty.end(),
                {"--debug-fail-capture", "1:1", "--collective-timeout", timeout_seconds(10)});
  const auto started = std::chrono::steady_clock::now();
  auto failed = run_with_graphs("one_graph_failed", faulty, requests);
  ASSERT_EQ(failed.cli.code, 0) << failed.cli.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s * test_slowdown())
      << "nobody waited for a timeout";
  EXPECT_NE(failed.cli.out.find(served), std::string::npos) << failed.cli.out;
  EXPECT_EQ(replays_of(failed), 0);
  EXPECT_EQ(failed.summary["graphs"]["eager_steps"], failed.summary["steps"]);
}

} // namespace
} // namespace kvactor::comm
