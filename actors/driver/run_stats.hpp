// What a run has done so far, counted by the driver after every step (pure: no CAF): the steps
// and their times, each request's latencies, the prompt tokens of requests past their prefill;
// summarize() and progress() read them with the scheduler's own counts.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "actors/chaos/chaos_link.hpp"
#include "actors/driver/collective_diagnosis.hpp"
#include "actors/driver/latency.hpp"
#include "actors/driver/scheduler.hpp"
#include "messages/step.hpp"

namespace kvactor {

/// Progress of a run, as the driver reports it after every step.
struct run_progress {
  int64_t steps = 0;
  int64_t finished = 0;
  int64_t failed = 0;
  int64_t total = 0;
  int64_t generated_tokens = 0;
  int64_t prompt_tokens = 0; // prompts of the requests whose prefill ended (a first token)
  int32_t running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0; // the null block not counted
  int64_t preemptions = 0;
  int64_t graph_replays = 0, eager_steps = 0;
  // Ranks whose last collective timed out, or failed otherwise (count_collective_outcomes).
  int64_t collective_timeouts = 0, collective_failures = 0;
  int64_t prefix_hit_tokens = 0; // prompt tokens admissions took from the prefix cache
  link_counts chaos;             // --chaos: what the links did, both directions of every link
  int64_t steps_resent = 0;      // copies of a step re-sent to a rank that had not answered
  double elapsed_s = 0.0;
  // Since the previous report: the steps' durations, each first token's TTFT, and the TPOT
  // (requests of two tokens or more) and end-to-end latency of each request that finished.
  std::vector<double> step_s, ttft_s, tpot_s, e2e_s;
};

/// How a run ended, when it ended early: why, and the ranks' collectives if one failed.
struct run_end {
  kvactor::error error;            // run_summary::error
  std::string drain;               // why the run was told to stop (atom::drain); empty: it was not
  collective_outcomes collectives; // of the failed step that ended the run, if one did
};

/// What the fabric counted, for the reports.
struct delivery_counts {
  link_counts chaos;
  int64_t steps_resent = 0;
};

class run_stats {
public:
  using clock_type = std::chrono::steady_clock;
  explicit run_stats(bool keep_events) : keep_events_(keep_events) {}

  void start() { started_ = clock_type::now(); }
  double elapsed_s() const;
  /// The step times so far, oldest first (re-sends wait for a multiple of the recent ones); at
  /// least the last max_kept_steps, which the summary's percentiles cover.
  const std::vector<double>& step_ms() const { return step_ms_; }
  static constexpr size_t max_kept_steps = size_t{1} << 20;
  request_latencies& latencies() { return latencies_; }

  /// Step `done`, scheduled at `t0`, was applied: its time, its tokens' latencies, and the
  /// prompts of requests whose first token it carries (vLLM's rule: work a failed or
  /// interrupted run never did is not counted).
  void count_step(const scheduler& sched, const step_done& done, clock_type::time_point t0);

  run_summary summarize(const scheduler& sched, const run_end& end) const;
  /// The progress now; the events since the last call move into it.
  run_progress progress(const scheduler& sched, const run_end& end, int64_t total_requests,
                        const delivery_counts& delivery);

private:
  void count_token(const scheduler& sched, uint64_t id, double now);
  void note_latencies(const scheduler& sched, const step_done& done);

  bool keep_events_; // latency events for progress reports
  clock_type::time_point started_;
  std::vector<double> step_ms_;
  request_latencies latencies_;
  run_progress events_; // latency and step events not yet reported
  int64_t steps_ = 0, graph_replays_ = 0, eager_steps_ = 0;
  int64_t prompt_tokens_ = 0;    // counted at each request's first token
  int64_t generated_tokens_ = 0; // tokens applied to their requests
};

/// A request's result as the scheduler holds it.
request_result result_of(const request_state& r);

/// Hex digest (FNV-1a, 64 bit) of every generated token, in request order.
std::string output_digest(const std::vector<request_result>& results);

} // namespace kvactor
