#include "attention_bench_cases.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace kvactor::bench {
namespace {

bench_case decode(int32_t batch, int32_t context, int32_t hq, bench_goal goal, std::string anchor) {
  bench_case c;
  c.name = fmt::format("decode {}x{} {}/8", batch, context, hq);
  c.key = hq == 32 ? fmt::format("decode{}x{}", batch, context)
                   : fmt::format("decode{}x{}h{}", batch, context, hq);
  c.num_q_heads = hq;
  c.num_kv_heads = 8;
  // A decode at context N attends to N keys: N - 1 cached and its own.
  c.reqs.assign(static_cast<size_t>(batch), bench_request{context - 1, 1});
  c.goal = goal;
  c.anchor = std::move(anchor);
  return c;
}

bench_case prefill(int32_t batch, int32_t tokens, bench_goal goal, std::string anchor) {
  bench_case c;
  c.name = fmt::format("prefill {}x{} 32/8", batch, tokens);
  c.key = fmt::format("prefill{}x{}", batch, tokens);
  c.reqs.assign(static_cast<size_t>(batch), bench_request{0, tokens});
  c.goal = goal;
  c.anchor = std::move(anchor);
  return c;
}

// The same case over an FP8 cache.
bench_case with_fp8(bench_case c, bench_goal goal) {
  c.name += " fp8";
  c.key += "_fp8";
  c.fp8 = true;
  c.goal = goal;
  c.anchor.clear();
  return c;
}

// The same case with its prefill chunks on another kernel (a baseline: no goal, no anchor).
bench_case on_kernel(bench_case c, prefill_choice kernel) {
  const bool mma = kernel == prefill_choice::mma_sync;
  c.name += mma ? " mma.sync" : " per tile";
  c.key += mma ? "_mma_sync" : "_per_tile";
  c.prefill = kernel;
  c.goal = {};
  c.anchor.clear();
  return c;
}
bench_case on_mma_sync(bench_case c) {
  return on_kernel(std::move(c), prefill_choice::mma_sync);
}
bench_case per_tile(bench_case c) {
  return on_kernel(std::move(c), prefill_choice::hopper_per_tile);
}

bench_case mixed() {
  bench_case c;
  c.name = "mixed 128x4096 + 4x(2048 on 2048) 32/8";
  c.key = "mixed";
  c.reqs.assign(128, bench_request{4095, 1});
  c.reqs.insert(c.reqs.end(), 4, bench_request{2048, 2048});
  c.goal = {goal_kind::max_us, 1500.0};
  c.anchor = "6129 us";
  return c;
}

} // namespace

int32_t bench_case::num_tokens() const {
  int32_t n = 0;
  for (const bench_request& r : reqs)
    n += r.fresh;
  return n;
}

int32_t bench_case::max_query_len() const {
  int32_t m = 0;
  for (const bench_request& r : reqs)
    m = std::max(m, r.fresh);
  return m;
}

int32_t bench_case::max_seq_len() const {
  int32_t m = 0;
  for (const bench_request& r : reqs)
    m = std::max(m, r.seq_len());
  return m;
}

double bench_case::kv_bytes() const {
  double keys = 0.0;
  for (const bench_request& r : reqs)
    keys += r.seq_len();
  return keys * num_kv_heads * head_size * (fp8 ? 1.0 : element_bytes) * 2.0;
}

double bench_case::flops() const {
  double pairs = 0.0; // (query, visible key) pairs of one head
  for (const bench_request& r : reqs) {
    const double c = r.cached, n = r.fresh;
    if (r.fresh == 1)
      pairs += c + 1.0;
    else if (r.cached == 0)
      pairs += n * n / 2.0;
    else
      pairs += n * c + n * (n + 1.0) / 2.0;
  }
  return 4.0 * pairs * num_q_heads * head_size;
}

std::string bench_case::describe_batch() const {
  std::string out;
  for (size_t i = 0; i < reqs.size();) {
    size_t j = i;
    while (j < reqs.size() && reqs[j].cached == reqs[i].cached && reqs[j].fresh == reqs[i].fresh)
      ++j;
    if (!out.empty()) out += " + ";
    out += fmt::format("{}x({}+{})", j - i, reqs[i].cached, reqs[i].fresh);
    i = j;
  }
  return out;
}

std::vector<bench_case> default_cases() {
  // Anchors: vLLM's Triton unified attention on an H200; for prefill also cuDNN's contiguous
  // SDPA.
  const bench_goal none{};
  return {
      decode(1, 4096, 32, {goal_kind::max_us, 8.0}, "31.4 us"),
      decode(1, 512, 32, none, ""), // the attention of the 8B decode step in kvactor_graph_bench
      decode(32, 4096, 32, {goal_kind::max_us, 140.0}, "239.7 us"),
      decode(128, 4096, 32, {goal_kind::min_copy_pct, 93.0}, "571.7 us"),
      decode(256, 2048, 32, none, "574.7 us"),
      decode(64, 16384, 32, none, "1117.6 us"),
      decode(256, 8192, 32, {goal_kind::min_copy_pct, 93.0}, "2220.6 us"),
      decode(128, 4096, 64, none, "625.5 us"),
      mixed(),
      per_tile(mixed()),
      on_mma_sync(mixed()),
      prefill(8, 4096, {goal_kind::min_tflops, 550.0}, "74 TF/s; cuDNN 541"),
      per_tile(prefill(8, 4096, none, "")),
      on_mma_sync(prefill(8, 4096, none, "")),
      prefill(1, 16384, none, "75 TF/s; cuDNN 582"),
      per_tile(prefill(1, 16384, none, "")),
      // The goal: FP8 decode at (128, 4096) moves >= 90% of the copy ceiling on its halved bytes.
      with_fp8(decode(1, 4096, 32, none, ""), none),
      with_fp8(decode(32, 4096, 32, none, ""), none),
      with_fp8(decode(128, 4096, 32, none, ""), {goal_kind::min_copy_pct, 90.0}),
      with_fp8(prefill(8, 4096, none, ""), none),
  };
}

std::string describe(const bench_goal& g) {
  switch (g.kind) {
  case goal_kind::none: return "";
  case goal_kind::max_us: return fmt::format("<= {:g} us", g.bound);
  case goal_kind::min_copy_pct: return fmt::format(">= {:g}% of copy", g.bound);
  case goal_kind::min_tflops: return fmt::format(">= {:g} TFLOP/s", g.bound);
  }
  return "";
}

bool goal_met(const bench_goal& g, double median_us, double copy_pct, double tflops) {
  switch (g.kind) {
  case goal_kind::none: return true;
  case goal_kind::max_us: return median_us <= g.bound;
  case goal_kind::min_copy_pct: return copy_pct >= g.bound;
  case goal_kind::min_tflops: return tflops >= g.bound;
  }
  return true;
}

} // namespace kvactor::bench
