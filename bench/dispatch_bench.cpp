// Graph dispatch per step: the precomputed candidate table against a scan of every captured
// descriptor (what a manager without the table does), on the default 256-sequence ladder.
// Summary line: "dispatch: table X ns, scan Y ns, speedup Z.ZZx".
#include <benchmark/benchmark.h>

#include "bench/summary_reporter.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "actors/cudagraph/dispatcher.hpp"
#include "actors/cudagraph/planner.hpp"

namespace {

using namespace kvactor;

const cudagraph_plan& default_plan() {
  static const cudagraph_plan plan = [] {
    cudagraph_options opt;
    opt.max_num_seqs = 256;
    opt.max_num_batched_tokens = 8192;
    return *plan_cudagraphs(opt);
  }();
  return plan;
}

struct batch {
  int32_t reqs;
  int32_t tokens;
  int32_t uniform;
};

// Half pure-decode batches, half mixed, sizes up to 600 tokens (some above the ladder).
const std::vector<batch>& batches() {
  static const std::vector<batch> out = [] {
    std::mt19937 rng(7);
    std::vector<batch> v;
    for (int i = 0; i < 4096; ++i) {
      int32_t tokens = 1 + static_cast<int32_t>(rng() % 600);
      bool decode = i % 2 == 0 && tokens <= 256;
      int32_t reqs = decode ? tokens : 1 + static_cast<int32_t>(rng() % std::min(tokens, 256));
      v.push_back({reqs, tokens, decode ? 1 : 0});
    }
    return v;
  }();
  return out;
}

// Baseline: all FULL then all PIECEWISE descriptors, sorted ascending, first compatible wins.
batch_descriptor scan(const std::vector<batch_descriptor>& all, const batch& b) {
  for (const auto& d : all)
    if (compatible(d, b.reqs, b.tokens, b.uniform, 0, 0, 1)) return d;
  return {cudagraph_mode::none, b.tokens, b.reqs, 0, 0, 0, false, 1};
}

void BM_dispatch_table(benchmark::State& state) {
  graph_dispatcher d(default_plan(), 256);
  const auto& bs = batches();
  size_t i = 0;
  for (auto _ : state) {
    const auto& b = bs[i++ & 4095];
    benchmark::DoNotOptimize(d.dispatch(b.reqs, b.tokens, b.uniform));
  }
}
BENCHMARK(BM_dispatch_table);

void BM_dispatch_scan(benchmark::State& state) {
  auto full = default_plan().full_graphs;
  auto piecewise = default_plan().piecewise_graphs;
  auto asc = [](const batch_descriptor& a, const batch_descriptor& b) {
    return a.num_tokens < b.num_tokens;
  };
  std::sort(full.begin(), full.end(), asc);
  std::sort(piecewise.begin(), piecewise.end(), asc);
  std::vector<batch_descriptor> all = full;
  all.insert(all.end(), piecewise.begin(), piecewise.end());
  const auto& bs = batches();
  size_t i = 0;
  for (auto _ : state) {
    const auto& b = bs[i++ & 4095];
    benchmark::DoNotOptimize(scan(all, b));
  }
}
BENCHMARK(BM_dispatch_scan);

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Both paths must agree before their speed means anything.
  {
    graph_dispatcher d(default_plan(), 256);
    auto full = default_plan().full_graphs;
    auto piecewise = default_plan().piecewise_graphs;
    auto asc = [](const auto& a, const auto& b) { return a.num_tokens < b.num_tokens; };
    std::sort(full.begin(), full.end(), asc);
    std::sort(piecewise.begin(), piecewise.end(), asc);
    full.insert(full.end(), piecewise.begin(), piecewise.end());
    for (const auto& b : batches())
      if (!(d.dispatch(b.reqs, b.tokens, b.uniform) == scan(full, b))) {
        std::fprintf(stderr, "dispatch mismatch at %d tokens, %d reqs\n", b.tokens, b.reqs);
        return 1;
      }
  }
  kvactor::bench::summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  double table = reporter.ns["BM_dispatch_table"];
  double base = reporter.ns["BM_dispatch_scan"];
  if (table > 0)
    std::printf("dispatch: table %.1f ns, scan %.1f ns, speedup %.2fx\n", table, base,
                base / table);
  return 0;
}
