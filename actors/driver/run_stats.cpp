#include "actors/driver/run_stats.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace kvactor {

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  auto idx = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(idx, v.size() - 1)];
}

} // namespace

request_result result_of(const request_state& r) {
  request_result res;
  res.request_id = r.id;
  res.finished = r.st == request_state::status::finished;
  res.output = r.output;
  res.num_preemptions = r.num_preemptions;
  res.failure = r.failure;
  res.reason = r.reason;
  res.logprobs = r.logprobs;
  return res;
}

double run_stats::elapsed_s() const {
  return std::chrono::duration<double>(clock_type::now() - started_).count();
}

void run_stats::count_step(const scheduler& sched, const step_done& done,
                           clock_type::time_point t0) {
  const double now = elapsed_s();
  for (const auto& s : done.sampled)
    count_token(sched, s.request_id, now);
  if (keep_events_) note_latencies(sched, done);
  ++steps_;
  // A long-lived server keeps the most recent max_kept_steps to max_kept_steps * 2 step times.
  if (step_ms_.size() >= 2 * max_kept_steps)
    step_ms_.erase(step_ms_.begin(), step_ms_.end() - static_cast<std::ptrdiff_t>(max_kept_steps));
  step_ms_.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  if (keep_events_) events_.step_s.push_back(step_ms_.back() / 1e3);
  if (done.executed.mode == cudagraph_mode::none)
    ++eager_steps_;
  else
    ++graph_replays_;
}

// A sampled token's time; a request's first token ends its prefill, and only then do its prompt
// tokens count.
void run_stats::count_token(const scheduler& sched, uint64_t id, double now) {
  const request_state* r = sched.find(id);
  // A token applied (a request failed before its step was applied gets none).
  if (r != nullptr && r->st != request_state::status::failed) ++generated_tokens_;
  latencies_.token(id, now);
  if (latencies_.timing(id).tokens != 1) return;
  if (r != nullptr) prompt_tokens_ += static_cast<int64_t>(r->prompt.size());
}

// The latency events of the step's sampled tokens, for the next progress report: a first
// token's TTFT, and a finished request's TPOT and end-to-end latency.
void run_stats::note_latencies(const scheduler& sched, const step_done& done) {
  for (const auto& s : done.sampled) {
    const request_timing t = latencies_.timing(s.request_id);
    if (t.tokens == 1) events_.ttft_s.push_back(t.ttft_s);
    const request_state* r = sched.find(s.request_id);
    if (r == nullptr || r->st != request_state::status::finished) continue;
    if (t.tokens > 1) events_.tpot_s.push_back(t.tpot_s);
    events_.e2e_s.push_back(t.e2e_s);
  }
}

run_summary run_stats::summarize(const scheduler& sched, const run_end& end) const {
  run_summary s;
  for (auto id : sched.request_order()) {
    s.results.push_back(result_of(*sched.find(id)));
  }
  s.generated_tokens = generated_tokens_;
  s.finished = sched.num_finished();
  s.failed = sched.num_failed();
  s.preempted = sched.num_preemptions();
  s.prompt_tokens = prompt_tokens_;
  s.steps = steps_;
  s.wall_s = elapsed_s();
  s.step_ms_p50 = percentile(step_ms_, 0.50);
  s.step_ms_p99 = percentile(step_ms_, 0.99);
  const auto lat = latencies_.summarize();
  s.ttft_ms_p50 = lat.ttft_ms_p50;
  s.ttft_ms_p99 = lat.ttft_ms_p99;
  s.tpot_ms_p50 = lat.tpot_ms_p50;
  s.tpot_ms_p99 = lat.tpot_ms_p99;
  s.e2e_ms_p50 = lat.e2e_ms_p50;
  s.e2e_ms_p99 = lat.e2e_ms_p99;
  s.kv_blocks_total = sched.pool().capacity(); // block 0 is the null block
  s.kv_blocks_peak_used = sched.peak_blocks_used();
  s.kv_blocks_held_at_end = sched.pool().num_used();
  s.graph_replays = graph_replays_;
  s.eager_steps = eager_steps_;
  s.prefix_hit_tokens = sched.num_prefix_hit_tokens();
  s.output_digest = output_digest(s.results);
  s.error = end.error;
  return s;
}

run_progress run_stats::progress(const scheduler& sched, const run_end& end, int64_t total_requests,
                                 const delivery_counts& delivery) {
  run_progress p;
  p.steps = steps_;
  p.finished = sched.num_finished();
  p.failed = sched.num_failed();
  p.total = total_requests;
  p.generated_tokens = generated_tokens_;
  p.prompt_tokens = prompt_tokens_;
  p.running = sched.num_running();
  p.waiting = sched.num_waiting();
  p.kv_blocks_used = sched.pool().num_used();
  p.kv_blocks_total = sched.pool().capacity();
  p.preemptions = sched.num_preemptions();
  p.graph_replays = graph_replays_;
  p.eager_steps = eager_steps_;
  p.collective_timeouts = end.collectives.timed_out;
  p.collective_failures = end.collectives.failed;
  p.prefix_hit_tokens = sched.num_prefix_hit_tokens();
  p.chaos = delivery.chaos;
  p.steps_resent = delivery.steps_resent;
  p.elapsed_s = elapsed_s();
  p.step_s = std::exchange(events_.step_s, {});
  p.ttft_s = std::exchange(events_.ttft_s, {});
  p.tpot_s = std::exchange(events_.tpot_s, {});
  p.e2e_s = std::exchange(events_.e2e_s, {});
  return p;
}

std::string output_digest(const std::vector<request_result>& results) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& r : results) {
    mix(r.request_id);
    mix(r.output.size());
    for (auto t : r.output)
      mix(static_cast<uint32_t>(t));
  }
  return fmt::format("{:016x}", h);
}

} // namespace kvactor
