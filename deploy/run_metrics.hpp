// What `--metrics-port` serves: the run's metrics in Prometheus' text exposition format, named
// like vLLM's where vLLM has one (vllm:num_requests_running -> kvactor:num_requests_running), and
// its health. Pure: the driver's progress reports feed it, an HTTP thread reads it (a mutex
// orders the two).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "actors/driver/actor.hpp"

namespace kvactor {

/// A cumulative histogram: counts per upper bound (le), then +Inf; sum and count.
class histogram {
public:
  explicit histogram(std::vector<double> bounds);
  void observe(double v);
  /// Lines NAME_bucket{le="..."} N (cumulative), NAME_sum, NAME_count.
  void render(const std::string& name, std::string& out) const;

private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_; // per bucket, bounds_.size() + 1 with +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

enum class health_state { starting, ready, finished, failed };

struct health_report {
  health_state state = health_state::starting;
  std::string reason; // why it is not ready, or why it failed
  int http_status() const { return state == health_state::ready ? 200 : 503; }
  /// "ready", "not ready: loading the model and the KV cache", "failed: ..." and so on.
  std::string text() const;
};

class run_metrics {
public:
  run_metrics();
  /// A progress report of the driver (run_progress): gauges set, counters and histograms fed.
  void observe(const run_progress& p);
  /// Every rank's start-up as it reported when ready: per rank and phase (load model, weights,
  /// KV cache, cudagraph capture, ...) its seconds and the memory its ledger then held, and its
  /// KV cache blocks.
  void observe_ready(const std::vector<rank_ready>& ready);
  void set_health(health_state state, std::string reason = {});
  /// Every metric with its # HELP and # TYPE lines.
  std::string prometheus_text() const;
  health_report health() const;

private:
  void render_ready(std::string& out) const;      // REQUIRES: mu_ held
  void render_memory_gap(std::string& out) const; // REQUIRES: mu_ held

  mutable std::mutex mu_;
  run_progress last_;
  std::vector<rank_ready> ready_;
  health_report health_;
  histogram ttft_, tpot_, e2e_, step_;
};

} // namespace kvactor
