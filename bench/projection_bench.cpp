// The CPU decoder's projections: projection() (OpenBLAS sgemm in tiles of 8 tokens, one thread)
// against the reference loop linear() on the same inputs in the same run, at the shape of a
// 1024-wide model's prefill (512 tokens) and decode (8 tokens). Reports GFLOP/s (2 * n * in * out
// per call) for each, and the ratio.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kvactor/kernels/dense_ops.h"

namespace {

using kvactor::kernels::linear;
using kvactor::kernels::projection;

struct inputs {
  inputs(int32_t n, int32_t in, int32_t out)
      : x(static_cast<size_t>(n) * in), w(static_cast<size_t>(in) * out),
        y(static_cast<size_t>(n) * out) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& v : x)
      v = u(rng);
    for (auto& v : w)
      v = u(rng);
  }
  std::vector<float> x, w, y;
};

template <bool Blas>
void BM_projection(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  const int32_t in = 1024, out = 1024;
  inputs d(n, in, out);
  for (auto _ : state) {
    if (Blas)
      projection(d.x.data(), d.w.data(), n, in, out, d.y.data());
    else
      linear(d.x.data(), d.w.data(), n, in, out, d.y.data());
    benchmark::DoNotOptimize(d.y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * in * out * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(Blas ? kvactor::kernels::projection_backend() : "reference loop");
}

BENCHMARK_TEMPLATE(BM_projection, true)->Arg(8)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_projection, false)->Arg(8)->Arg(512)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
