// The NCCL communicator on the GPUs there are: TP 1 on one GPU (init, every collective on known
// data, the ledger), initialization that a peer never joins and a collective a peer never enters
// time out instead of hanging, and `kvactor run --device cuda` over NCCL. Tests that need a GPU
// skip with "no CUDA device: ..."; those that need two skip on one.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include "../comm/collective_support.hpp"
#include "../deploy/cli_support.hpp"
#include "../support/sanitizer_slowdown.hpp"
#include "gpu_support.hpp"
#include "kvactor/comm/collective_ledger.h"
#include "kvactor/comm/nccl_communicator.h"

namespace kvactor::comm {
namespace {

using namespace std::chrono_literals;
using kernels::gpu_test::device_array;
using ::kvactor::test::test_slowdown;

int visible_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

using test::catch_collective;
using test::caught;

std::shared_ptr<communicator> join(const std::vector<char>& id, int world, int rank,
                                   std::chrono::milliseconds timeout = 60s) {
  nccl_options opt;
  opt.device = rank;
  opt.timeout = timeout;
  return make_nccl_communicator(id, world, rank, opt);
}

TEST(NcclCommunicator, BadArgumentsAreRejectedBeforeAnyCudaCall) {
  std::string why;
  if (!nccl_available(&why)) GTEST_SKIP() << why;
  auto c = catch_collective([] { join({'x', 'y', 'z'}, 1, 0); });
  EXPECT_EQ(c.kind, collective_failure::invalid_argument);
  EXPECT_NE(c.what.find("unique_id: 3 bytes, an NCCL id has 128"), std::string::npos) << c.what;
  c = catch_collective([] { join(std::vector<char>(128), 2, 2); });
  EXPECT_EQ(c.kind, collective_failure::invalid_argument);
  EXPECT_NE(c.what.find("rank: 2 is outside [0, 2)"), std::string::npos) << c.what;
}

TEST(NcclCommunicator, OneRankRunsEveryCollectiveOnKnownDataAndLedgersEach) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto comm = join(nccl_unique_id(), 1, 0);
  ASSERT_EQ(comm->world_size(), 1);
  EXPECT_EQ(comm->space(), memory_space::device);
  std::vector<float> host(4096);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = 0.5f * static_cast<float>(i) - 1000.0f;
  device_array<float> f(host);
  comm->all_reduce(f.get(), host.size(), reduce_op::sum);
  comm->all_reduce(f.get(), host.size(), reduce_op::min);
  comm->all_reduce(f.get(), host.size(), reduce_op::max);
  device_array<int64_t> i64(std::vector<int64_t>{int64_t{1} << 40, -7, 3});
  comm->all_reduce(i64.get(), 3, reduce_op::sum);
  device_array<float> gathered(host.size());
  comm->all_gather(f.get(), gathered.get(), host.size(), collective_dtype::float32);
  // On a stream of the caller's: results in stream order, synchronize() waits for them.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  comm->broadcast(f.get(), host.size(), collective_dtype::float32, 0, stream);
  comm->synchronize();
  cudaStreamDestroy(stream);
  comm->barrier();
  EXPECT_EQ(comm->agree(42, reduce_op::min), 42);
  EXPECT_EQ(f.download(), host) << "one rank: every reduction is the identity";
  EXPECT_EQ(gathered.download(), host);
  EXPECT_EQ(i64.download(), (std::vector<int64_t>{int64_t{1} << 40, -7, 3}));
  const auto entries = comm->ledger().entries();
  ASSERT_EQ(entries.size(), 8u); // 4 all-reduces, all_gather, broadcast, barrier, agree
  EXPECT_EQ(describe(entries[0]), "all_reduce(sum) #1 (4096 float32, 16384 bytes, completed)");
  EXPECT_EQ(describe(entries[3]), "all_reduce(sum) #4 (3 int64, 24 bytes, completed)");
  EXPECT_EQ(operation_name(entries[4]), "all_gather");
  EXPECT_EQ(operation_name(entries[5]), "broadcast(root 0)");
  EXPECT_EQ(operation_name(entries[6]), "barrier");
  EXPECT_EQ(describe(entries[7]), "all_reduce(min) #8 (1 int64, 8 bytes, completed)");
  for (const auto& e : entries)
    EXPECT_EQ(e.status, collective_status::completed) << describe(e);
}

TEST(NcclCommunicator, OneRankCapturesItsAllReduceIntoAGraphAndLedgersEachLaunch) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto comm = join(nccl_unique_id(), 1, 0);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  device_array<float> buf(4096);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  comm->all_reduce(buf.get(), 4096, reduce_op::sum, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  const auto captured = comm->take_captured();
  ASSERT_EQ(captured.size(), 1u);
  EXPECT_EQ(describe(captured[0]), "all_reduce(sum) #0 (4096 float32, 16384 bytes, pending)");
  EXPECT_TRUE(comm->ledger().entries().empty()) << "a captured collective runs at launch";
  for (int launch = 0; launch < 3; ++launch) {
    std::vector<float> host(4096, static_cast<float>(launch) - 0.5f);
    ASSERT_EQ(cudaMemcpyAsync(buf.get(), host.data(), host.size() * sizeof(float),
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    comm->replayed(captured, stream);
    comm->synchronize();
    EXPECT_EQ(buf.download(), host) << "one rank: the sum is the identity, launch " << launch;
  }
  const auto entries = comm->ledger().entries();
  ASSERT_EQ(entries.size(), 3u);
  for (const auto& e : entries)
    EXPECT_EQ(describe(e).substr(0, 19), "all_reduce(sum) #" + std::to_string(e.seq) + " ")
        << describe(e);
  for (const auto& e : entries)
    EXPECT_EQ(e.status, collective_status::completed) << describe(e);
  // The per-step agreement's gather: one rank's values back, through device memory.
  EXPECT_EQ(comm->gather({4, -5, int64_t{1} << 40}),
            (std::vector<int64_t>{4, -5, int64_t{1} << 40}));
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
}

TEST(NcclCommunicator, InitializationThatAPeerNeverJoinsTimesOutInsteadOfHanging) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const auto start = std::chrono::steady_clock::now();
  auto c = catch_collective([] { join(nccl_unique_id(), 2, 0, 2s); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s * test_slowdown());
  EXPECT_EQ(c.kind, collective_failure::timeout) << c.what;
  EXPECT_NE(c.what.find("NCCL initialization did not complete within 2 s (not every rank of 2 "
                        "joined)"),
            std::string::npos)
      << c.what;
}

TEST(NcclCommunicator, TwoGpusSumEveryRanksDataInEveryRank) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  if (visible_gpus() < 2) GTEST_SKIP() << "needs 2 GPUs, " << visible_gpus() << " visible";
  const auto id = nccl_unique_id();
  std::vector<std::vector<float>> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto comm = join(id, 2, r);
      device_array<float> buf(std::vector<float>(1024, static_cast<float>(r + 1)));
      comm->all_reduce(buf.get(), 1024, reduce_op::sum);
      comm->synchronize();
      got[static_cast<size_t>(r)] = buf.download();
      EXPECT_EQ(comm->agree(10 + r, reduce_op::max), 11);
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(got[0], std::vector<float>(1024, 3.0f));
  EXPECT_EQ(got[1], got[0]);
}

TEST(NcclCommunicator, ACollectiveAPeerNeverEntersTimesOutWithTheLedger) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  if (visible_gpus() < 2) GTEST_SKIP() << "needs 2 GPUs, " << visible_gpus() << " visible";
  const auto id = nccl_unique_id();
  caught c;
  std::promise<void> rank0_done;
  std::thread peer([&, done = rank0_done.get_future()] { // joins, then never enters the all-reduce
    try {
      auto comm = join(id, 2, 1, 2s);
      done.wait(); // holds its communicator until rank 0 has timed out and aborted
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank 1: " << e.what();
    }
  });
  // However rank 0's part ends (a throw included), the peer is let go and joined.
  struct release_peer {
    std::promise<void>& done;
    std::thread& peer;
    ~release_peer() {
      done.set_value();
      peer.join();
    }
  } release{rank0_done, peer};
  {
    auto comm = join(id, 2, 0, 2s);
    device_array<float> buf(std::vector<float>(256, 1.0f));
    const auto start = std::chrono::steady_clock::now();
    c = catch_collective([&] {
      comm->all_reduce(buf.get(), 256, reduce_op::sum);
      comm->synchronize();
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s * test_slowdown());
    EXPECT_TRUE(comm->aborted());
  }
  EXPECT_EQ(c.kind, collective_failure::timeout) << c.what;
  EXPECT_NE(c.what.find("all_reduce(sum) #1 (256 float32, 1024 bytes, pending) did not complete "
                        "within 2 s"),
            std::string::npos)
      << c.what;
  EXPECT_NE(c.what.find("this rank's last collectives: all_reduce(sum) #1 (256 float32, 1024 "
                        "bytes, timed_out)"),
            std::string::npos)
      << c.what;
}

// ---- kvactor run over NCCL ------------------------------------------------------------------

::kvactor::test::cli_result run(const std::vector<std::string>& extra) {
  std::vector<std::string> args{
      "run",           "--device",          "cuda",  "--seed", "11", "--requests", "12",
      "--no-progress", "--kv-cache-memory", "256MiB"};
  args.insert(args.end(), extra.begin(), extra.end());
  return ::kvactor::test::run_cli(std::move(args));
}

std::string digest_of(const std::string& out) {
  auto at = out.find("digest");
  if (at == std::string::npos) return {};
  std::istringstream in(out.substr(at));
  std::string word, digest;
  in >> word >> digest;
  return digest;
}

TEST(GpuRankNccl, OneGpuRankOverNcclServesTheSameTokensAsWithoutIt) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  auto plain = run({});
  auto nccl = run({"--communicator", "nccl", "--collective-timeout", "60"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(nccl.code, 0) << nccl.err;
  EXPECT_NE(nccl.out.find("12 finished, 0 failed"), std::string::npos) << nccl.out;
  EXPECT_EQ(digest_of(nccl.out), digest_of(plain.out));
}

TEST(GpuRankNccl, MoreGpuRanksThanGpusIsAClearError) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  const int n = visible_gpus();
  auto r = run({"--tensor-parallel-size", std::to_string(n * 2)});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--tensor-parallel-size: " + std::to_string(n * 2) + " GPU ranks need "
                       + std::to_string(n * 2) + " GPUs, " + std::to_string(n) + " visible"),
            std::string::npos)
      << r.err;
}

TEST(GpuRankNccl, TwoGpuRanksServeEveryRequest) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  if (visible_gpus() < 2) GTEST_SKIP() << "needs 2 GPUs, " << visible_gpus() << " visible";
  auto r = run({"--tensor-parallel-size", "2", "--collective-timeout", "60"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(2 rank(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("12 finished, 0 failed"), std::string::npos) << r.out;
}

} // namespace
} // namespace kvactor::comm
