// Graph dispatch per step on the default 256-sequence ladder: kvactor's dispatcher (candidate
// lists precomputed per token count) against vLLM's way, measured in the same run: a table from
// token count to padded capture size, then hash lookups of the padded key (vLLM v1's
// CudagraphDispatcher.dispatch over the model runner's bs_to_padded_graph_size). Both give the
// same descriptor for every batch; that is checked before timing.
// Summary line: "dispatch: kvactor X ns, vLLM-style keyed lookup Y ns, kvactor/keyed Z.ZZx"
// (above 1: kvactor's dispatch is the slower one).
#include <benchmark/benchmark.h>

#include "bench/summary_reporter.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

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

// Baseline: vLLM's dispatch. The model runner pads the token count through a precomputed list
// (bs_to_padded_graph_size[n]: the smallest capture size >= n, an O(1) index); the dispatcher
// then looks the padded key up in hash sets: FULL (num_tokens, uniform_decode), else FULL with
// the non-uniform key, else PIECEWISE with the non-uniform key; else eager, unpadded.
class keyed_dispatcher {
public:
  explicit keyed_dispatcher(const cudagraph_plan& plan) {
    int32_t max_tokens = 0;
    for (const auto& d : plan.full_graphs) {
      full_.emplace(key(d.num_tokens, d.uniform_token_count != 0), d);
      max_tokens = std::max(max_tokens, d.num_tokens);
    }
    for (const auto& d : plan.piecewise_graphs) {
      piecewise_.emplace(key(d.num_tokens, false), d);
      max_tokens = std::max(max_tokens, d.num_tokens);
    }
    std::vector<int32_t> sizes;
    for (const auto* xs : {&plan.full_graphs, &plan.piecewise_graphs})
      for (const auto& d : *xs)
        sizes.push_back(d.num_tokens);
    std::sort(sizes.begin(), sizes.end());
    padded_.assign(static_cast<size_t>(max_tokens) + 1, 0);
    for (int32_t n = 1; n <= max_tokens; ++n)
      padded_[static_cast<size_t>(n)] = *std::lower_bound(sizes.begin(), sizes.end(), n);
  }

  batch_descriptor dispatch(const batch& b) const {
    if (b.tokens > 0 && static_cast<size_t>(b.tokens) < padded_.size()) {
      const int32_t t = padded_[static_cast<size_t>(b.tokens)];
      if (b.uniform != 0)
        if (auto it = full_.find(key(t, true)); it != full_.end()) return it->second;
      if (auto it = full_.find(key(t, false)); it != full_.end()) return it->second;
      if (auto it = piecewise_.find(key(t, false)); it != piecewise_.end()) return it->second;
    }
    return {cudagraph_mode::none, b.tokens, b.reqs, 0, 0, 0, false, 1};
  }

private:
  static uint64_t key(int32_t num_tokens, bool uniform) {
    return (static_cast<uint64_t>(num_tokens) << 1) | (uniform ? 1 : 0);
  }

  std::unordered_map<uint64_t, batch_descriptor> full_, piecewise_;
  std::vector<int32_t> padded_; // [max captured tokens + 1]
};

void BM_dispatch_kvactor(benchmark::State& state) {
  graph_dispatcher d(default_plan(), 256);
  const auto& bs = batches();
  size_t i = 0;
  for (auto _ : state) {
    const auto& b = bs[i++ & 4095];
    benchmark::DoNotOptimize(d.dispatch(b.reqs, b.tokens, b.uniform));
  }
}
BENCHMARK(BM_dispatch_kvactor);

void BM_dispatch_keyed(benchmark::State& state) {
  keyed_dispatcher d(default_plan());
  const auto& bs = batches();
  size_t i = 0;
  for (auto _ : state) {
    const auto& b = bs[i++ & 4095];
    benchmark::DoNotOptimize(d.dispatch(b));
  }
}
BENCHMARK(BM_dispatch_keyed);

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Both must pick the same graph (or eager) for every batch before their speed means anything.
  {
    graph_dispatcher d(default_plan(), 256);
    keyed_dispatcher keyed(default_plan());
    for (const auto& b : batches())
      if (!(d.dispatch(b.reqs, b.tokens, b.uniform) == keyed.dispatch(b))) {
        std::fprintf(stderr, "dispatch mismatch at %d tokens, %d reqs\n", b.tokens, b.reqs);
        return 1;
      }
  }
  kvactor::bench::summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double ours = reporter.ns["BM_dispatch_kvactor"];
  const double keyed = reporter.ns["BM_dispatch_keyed"];
  if (ours > 0 && keyed > 0)
    std::printf("dispatch: kvactor %.1f ns, vLLM-style keyed lookup %.1f ns, kvactor/keyed %.2fx\n",
                ours, keyed, ours / keyed);
  return 0;
}
