// The cases of kvactor_attention_bench: the shapes of the H200 anchors (bench/ANCHORS.md), issue
// 5's goals, and how bytes and FLOPs are counted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvactor::bench {

constexpr int32_t head_size = 128;
constexpr int32_t kernel_block_size = 16;
constexpr double element_bytes = 2.0; // bf16 (an FP8 cache: 1)

/// One request of a batch: `cached` tokens already in the cache and `fresh` tokens of this step
/// (its queries, their keys written before the call); it attends to cached + fresh tokens.
struct bench_request {
  int32_t cached = 0;
  int32_t fresh = 1;
  int32_t seq_len() const { return cached + fresh; }
};

/// Which prefill kernel takes a case's prefill chunks (the launcher's choice, or a baseline that
/// the default is measured against in the same run).
enum class prefill_choice {
  automatic,       // the Hopper kernel where it applies, persistent (the bench gives a workspace)
  mma_sync,        // the portable mma.sync kernel
  hopper_per_tile, // the Hopper kernel with one CTA per tile
};

/// What a goal bounds, and how.
enum class goal_kind {
  none,
  max_us,       // median microseconds <= bound
  min_copy_pct, // K+V bytes per second >= bound percent of the measured copy ceiling
  min_tflops,   // TFLOP/s >= bound
};

struct bench_goal {
  goal_kind kind = goal_kind::none;
  double bound = 0.0;
};

struct bench_case {
  std::string name; // "decode 128x4096 32/8"
  std::string key;  // for the summary line: "decode128x4096"
  int32_t num_q_heads = 32;
  int32_t num_kv_heads = 8;
  std::vector<bench_request> reqs;
  bool fp8 = false; // an FP8 E4M3 cache (scales 1); q and out stay bf16
  prefill_choice prefill = prefill_choice::automatic;
  bench_goal goal;
  std::string anchor; // the incumbent's figure in the anchors, or ""

  int32_t num_tokens() const;
  /// The longest request's query tokens: the bound a decoder step passes with its metadata.
  int32_t max_query_len() const;
  int32_t max_seq_len() const;
  /// K+V bytes when every key is read once: sum of seq_len x kv_heads x head x 2 B (1 B with
  /// FP8) x 2.
  double kv_bytes() const;
  /// Attention FLOPs, 4 per (query, q head, visible key, dim) (q.k and p.v, a multiply-add each):
  /// a decode 4.seq.h.d; a pure prefill of s tokens 4.h.s^2.d / 2, as the anchors count it; a
  /// chunk of n tokens on c cached ones the exact causal work 4.h.d.sum_i (c + i + 1).
  double flops() const;
  /// "128x(4095+1) + 4x(2048+2048)": runs of (cached + fresh) requests.
  std::string describe_batch() const;
};

/// The cases, in the order they run.
std::vector<bench_case> default_cases();

/// "<= 8 us", ">= 93% of copy", ">= 450 TFLOP/s"; "" without a goal.
std::string describe(const bench_goal& g);

/// Whether the measurements meet g (true without a goal).
bool goal_met(const bench_goal& g, double median_us, double copy_pct, double tflops);

} // namespace kvactor::bench
