// All-reduce latency per message size: the host communicator with 2 and 4 CPU ranks (one thread
// each, float32 sum in rank order); with --nccl the NCCL communicator over 1, 2, 4 and 8 of the
// visible GPUs, and with --device-local the device-local communicator with 2, 4 and 8 ranks
// sharing GPU 0 (all-reduce then synchronize; skipped, saying why, without a GPU or NCCL). The
// sizes span a decode step's all-reduces: a Llama-3.1-8B step of batch 1 reduces 16 KiB (4096
// float32 per token), one of batch 256 reduces 4 MiB.
// One benchmark thread per rank; every rank runs the same iterations, so the group stays in step.
// Summary line:
//   "collectives: host all_reduce(sum) float32 us per op, 2 ranks: 4KiB A, ..., 4MiB B; 4 ranks:
//    ...[; nccl N ranks: ...][; device-local N ranks: ...]"
#include <benchmark/benchmark.h>

#include "bench/summary_reporter.hpp"

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvactor/comm/device_local_communicator.h"
#include "kvactor/comm/host_communicator.h"
#include "kvactor/comm/nccl_communicator.h"
#include "kvactor/kernels/device_runtime.h"

namespace {

using namespace kvactor::kernels;
using group = std::vector<std::shared_ptr<communicator>>;

constexpr int64_t min_bytes = 4 << 10, max_bytes = 4 << 20;
const std::vector<int64_t> sizes{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};

std::map<int, group> host_groups; // world -> one communicator per rank
std::map<int, group> nccl_groups;
std::map<int, group> device_local_groups; // world -> ranks sharing GPU 0

void BM_host_all_reduce(benchmark::State& state) {
  auto& comm = *host_groups.at(state.threads())[static_cast<size_t>(state.thread_index())];
  std::vector<float> buf(static_cast<size_t>(state.range(0)) / sizeof(float), 1.0f);
  for (auto _ : state)
    comm.all_reduce(buf.data(), buf.size());
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_host_all_reduce)
    ->RangeMultiplier(4)
    ->Range(min_bytes, max_bytes)
    ->Threads(2)
    ->Threads(4)
    ->UseRealTime();

// One rank's all-reduce then synchronize, in device memory of GPU `device`.
void device_all_reduce(benchmark::State& state, communicator& comm, int device) {
  std::string why;
  if (!select_gpu(device, &why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  auto buf = device_buffer::allocate(state.range(0), &why);
  if (!buf) {
    state.SkipWithError(why.c_str());
    return;
  }
  const auto count = static_cast<size_t>(state.range(0)) / sizeof(float);
  for (auto _ : state) {
    comm.all_reduce(static_cast<float*>(buf->data()), count);
    comm.synchronize();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_nccl_all_reduce(benchmark::State& state) {
  const int rank = state.thread_index();
  device_all_reduce(state, *nccl_groups.at(state.threads())[static_cast<size_t>(rank)], rank);
}

void BM_device_local_all_reduce(benchmark::State& state) {
  const auto rank = static_cast<size_t>(state.thread_index());
  device_all_reduce(state, *device_local_groups.at(state.threads())[rank], 0);
}

// NCCL groups of 1, 2, 4 and 8 ranks over the visible GPUs (rank r on GPU r); every rank of a
// group joins at once, one thread each. Empty, with `why` set, when there is no GPU or NCCL.
std::vector<int> make_nccl_groups(std::string& why) {
  if (!nccl_available(&why)) return {};
  const int gpus = gpu_count(&why);
  std::vector<int> worlds;
  for (int world : {1, 2, 4, 8}) {
    if (world > gpus) break;
    const auto id = nccl_unique_id();
    group g(static_cast<size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      threads.emplace_back([&, r] {
        nccl_options opt;
        opt.device = r;
        opt.timeout = std::chrono::seconds(60);
        g[static_cast<size_t>(r)] = make_nccl_communicator(id, world, r, opt);
      });
    for (auto& t : threads)
      t.join();
    nccl_groups[world] = std::move(g);
    worlds.push_back(world);
  }
  if (worlds.empty() && why.empty()) why = "no CUDA device is visible";
  return worlds;
}

std::string size_name(int64_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + "MiB"
                            : std::to_string(bytes >> 10) + "KiB";
}

// "2 ranks: 4KiB 3.1, 16KiB 4.0, ..." in microseconds per all-reduce.
std::string row(kvactor::bench::summary_reporter& reporter, const std::string& bench, int world) {
  std::string out = std::to_string(world) + " ranks:";
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto name =
        bench + "/" + std::to_string(sizes[i]) + "/real_time/threads:" + std::to_string(world);
    char buf[64];
    if (reporter.ns.count(name) == 0) { // filtered out
      std::snprintf(buf, sizeof buf, "%s %s -", i == 0 ? "" : ",", size_name(sizes[i]).c_str());
    } else {
      // Google Benchmark divides each thread's wall time by the iterations of all threads.
      const double us = reporter.ns[name] * world / 1e3;
      std::snprintf(buf, sizeof buf, "%s %s %.1f", i == 0 ? "" : ",", size_name(sizes[i]).c_str(),
                    us);
    }
    out += buf;
  }
  return out;
}

// Removes `flag` from argv (before Google Benchmark reads it); whether it was there.
bool take_flag(int& argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) {
      for (int j = i; j + 1 < argc; ++j)
        argv[j] = argv[j + 1];
      --argc;
      return true;
    }
  return false;
}

void register_device(const char* name, void (*bench)(benchmark::State&), int world) {
  benchmark::RegisterBenchmark(name, bench)
      ->RangeMultiplier(4)
      ->Range(min_bytes, max_bytes)
      ->Threads(world)
      ->UseRealTime();
}

} // namespace

int main(int argc, char** argv) {
  const bool nccl = take_flag(argc, argv, "--nccl");
  const bool device_local = take_flag(argc, argv, "--device-local");
  benchmark::Initialize(&argc, argv);
  for (int world : {2, 4})
    host_groups[world] = [&] {
      auto g = host_communicator::create_group(world, std::chrono::seconds(60));
      return group(g.begin(), g.end());
    }();
  std::string no_nccl;
  std::vector<int> nccl_worlds;
  if (nccl) {
    try {
      nccl_worlds = make_nccl_groups(no_nccl);
    } catch (const collective_error& e) {
      no_nccl = e.what();
    }
    for (int world : nccl_worlds)
      register_device("BM_nccl_all_reduce", BM_nccl_all_reduce, world);
  }
  std::string no_device_local;
  if (device_local) try {
      std::string why;
      if (gpu_count(&why) < 1) throw collective_error(collective_failure::transport, why);
      for (int world : {2, 4, 8}) {
        device_local_groups[world] = make_device_local_group(world, 0, std::chrono::seconds(60));
        register_device("BM_device_local_all_reduce", BM_device_local_all_reduce, world);
      }
    } catch (const collective_error& e) {
      no_device_local = e.what();
      device_local_groups.clear();
    }
  kvactor::bench::summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::string line = "collectives: host all_reduce(sum) float32 us per op, "
                     + row(reporter, "BM_host_all_reduce", 2) + "; "
                     + row(reporter, "BM_host_all_reduce", 4);
  for (int world : nccl_worlds)
    line += "; nccl " + row(reporter, "BM_nccl_all_reduce", world);
  if (nccl && nccl_worlds.empty()) line += "; nccl: skipped (" + no_nccl + ")";
  for (const auto& [world, g] : device_local_groups)
    line += "; device-local " + row(reporter, "BM_device_local_all_reduce", world);
  if (device_local && device_local_groups.empty())
    line += "; device-local: skipped (" + no_device_local + ")";
  std::printf("%s\n", line.c_str());
  nccl_groups.clear(); // NCCL communicators finalize before the process exits
  device_local_groups.clear();
  return 0;
}
