// One step through the actor pipeline without kernels: driver -> rank(s) -> builder ->
// cudagraph dispatch -> step_done -> driver, for 1 and 4 ranks, on the default model with 16
// decoding requests. Baseline in the same run: one request/response between two event-based
// actors (CAF's floor for one hop). Reported: median step time.
// Summary line: "pipeline: 1 rank X us, 4 ranks Y us (goal 20 us with 1 rank); hop Z us, ratio R".
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/driver/actor.hpp"
#include "actors/rank/actor.hpp"
#include "actors/rank/group.hpp"
#include "actors/runtime_config.hpp"
#include "actors/spawn_plain.hpp"
#include "messages/register.hpp"

namespace {

using namespace kvactor;

// record: a trace_recorder writing to a file, as `kvactor run --record` does; kernels: run the
// CPU attention stack too (the realistic case), else the protocol alone (the worst case).
double median_step_us(int32_t ranks, bool record = false, bool kernels = false) {
  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  if (const char* t = std::getenv("KVACTOR_BENCH_THREADS"))
    cfg.set("scheduler.max-threads", std::atoi(t));
  caf::actor_system sys{cfg};
  std::vector<rank_actor> handles;
  std::vector<rank_config> configs;
  for (int32_t r = 0; r < ranks; ++r) {
    rank_config c;
    c.rank = r;
    c.tensor_parallel_size = ranks;
    c.model = "kvactor-tiny";
    c.device = device_kind::cpu;
    c.max_model_len = 2048;
    c.max_num_seqs = 16;
    c.max_num_batched_tokens = 256;
    c.kv_cache_memory = int64_t{64} << 20;
    c.executor = kernels ? "" : "protocol"; // the step protocol alone
    configs.push_back(c);
  }
  std::ofstream trace_file;
  std::shared_ptr<trace_recorder> recorder;
  if (record) {
    trace_file.open("/tmp/kvactor_bench.kvtrace", std::ios::binary | std::ios::trunc);
    recorder = std::make_shared<trace_recorder>(trace_file);
  }
  // As `kvactor run` spawns them: several ranks form one host communicator group (detached:
  // they agree on the block count in a collective).
  rank_group_options group;
  group.world = ranks;
  group.recorder = recorder;
  handles = spawn_rank_group(sys, group);
  auto drv = sys.spawn(driver, driver_setup{handles, configs, 1, {}, recorder});
  std::vector<request_spec> work;
  for (uint64_t i = 0; i < 16; ++i)
    work.push_back(
        {i, std::vector<int32_t>(8, 1),
         std::getenv("KVACTOR_BENCH_OUTPUT") ? std::atoi(std::getenv("KVACTOR_BENCH_OUTPUT")) : 128,
         0});
  caf::scoped_actor self{sys};
  double p50 = -1;
  self->request(drv, caf::infinite, atom::start_v)
      .receive([](std::vector<rank_ready>&) {},
               [&](caf::error& e) { std::fprintf(stderr, "start: %s\n", sys.render(e).c_str()); });
  self->request(drv, caf::infinite, atom::submit_v, work)
      .receive([](int64_t) {}, [](caf::error&) {});
  self->request(drv, caf::infinite, atom::run_v)
      .receive([&](run_summary& s) { p50 = s.step_ms_p50 * 1e3; }, [](caf::error&) {});
  self->send_exit(drv, caf::exit_reason::user_shutdown);
  for (auto& h : handles)
    self->send_exit(h, caf::exit_reason::user_shutdown);
  return p50;
}

using echo_actor = caf::typed_actor<caf::replies_to<int32_t>::with<int32_t>>;

echo_actor::behavior_type echo(echo_actor::pointer) {
  return {[](int32_t x) { return x; }};
}

double median_hop_us() {
  caf::actor_system_config cfg;
  configure_step_latency(cfg);
  caf::actor_system sys{cfg};
  auto e = sys.spawn(plain<&echo>, nullptr);
  auto samples = std::make_shared<std::vector<double>>();
  // The ignored nullptr: CAF 0.17 binds a null reference for a spawn without arguments.
  sys.spawn(
      [e, samples](caf::event_based_actor* self, std::nullptr_t) {
        auto loop = std::make_shared<std::function<void(int)>>();
        *loop = [self, e, samples, loop](int left) {
          if (left == 0) {
            self->send_exit(e, caf::exit_reason::user_shutdown);
            self->quit();
            return;
          }
          auto t0 = std::chrono::steady_clock::now();
          self->request(e, caf::infinite, int32_t{1}).then([=](int32_t) {
            samples->push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count());
            (*loop)(left - 1);
          });
        };
        (*loop)(20000);
      },
      nullptr);
  sys.await_all_actors_done();
  std::sort(samples->begin(), samples->end());
  return samples->empty() ? -1 : (*samples)[samples->size() / 2];
}

std::map<std::string, double> results;

// Five runs of 128 steps each; the median of the runs' medians (2 shared cores are noisy).
double repeated_median_step_us(int32_t ranks, bool record = false, bool kernels = false) {
  std::vector<double> runs;
  for (int i = 0; i < 5; ++i)
    runs.push_back(median_step_us(ranks, record, kernels));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

// Recording on and off, alternating so that drift on the shared cores hits both sides.
void BM_recording(benchmark::State& state) {
  const bool kernels = state.range(0) == 1;
  const std::string key = kernels ? "kernels" : "protocol";
  for (auto _ : state) {
    std::vector<double> off, on;
    for (int i = 0; i < 5; ++i) {
      off.push_back(median_step_us(1, false, kernels));
      on.push_back(median_step_us(1, true, kernels));
    }
    std::sort(off.begin(), off.end());
    std::sort(on.begin(), on.end());
    state.SetIterationTime(on[2] / 1e6);
    results[key + "_off"] = off[2];
    results[key + "_on"] = on[2];
  }
}
BENCHMARK(BM_recording)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_pipeline_step(benchmark::State& state) {
  for (auto _ : state) {
    double us = repeated_median_step_us(static_cast<int32_t>(state.range(0)));
    state.SetIterationTime(us / 1e6);
    results["ranks" + std::to_string(state.range(0))] = us;
  }
}
BENCHMARK(BM_pipeline_step)
    ->Arg(1)
    ->Arg(4)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_actor_hop(benchmark::State& state) {
  for (auto _ : state) {
    double us = median_hop_us();
    state.SetIterationTime(us / 1e6);
    results["hop"] = us;
  }
}
BENCHMARK(BM_actor_hop)->Iterations(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

} // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  if (results.count("ranks1") && results.count("hop"))
    std::printf("pipeline: 1 rank %.1f us, 4 ranks %.1f us (goal 20 us with 1 rank); hop %.1f "
                "us, ratio %.1fx\n",
                results["ranks1"], results["ranks4"], results["hop"],
                results["ranks1"] / results["hop"]);
  if (results.count("protocol_on") && results.count("kernels_on"))
    std::printf("recording: protocol only %.1f -> %.1f us per step (%+.1f%%), with CPU kernels "
                "%.1f -> %.1f us (%+.1f%%) (goal <= +5%%)\n",
                results["protocol_off"], results["protocol_on"],
                100.0 * (results["protocol_on"] / results["protocol_off"] - 1.0),
                results["kernels_off"], results["kernels_on"],
                100.0 * (results["kernels_on"] / results["kernels_off"] - 1.0));
  return 0;
}
