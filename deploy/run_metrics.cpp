#include "deploy/run_metrics.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvactor {

namespace {

// vLLM's buckets for the same histograms (vllm/v1/metrics/loggers.py), in seconds.
const std::vector<double> ttft_buckets{0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                       0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                       20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> tpot_buckets{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                       0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> e2e_buckets{0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                      5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                      60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// Ours: a step from the driver's plan to every rank's answer.
const std::vector<double> step_buckets{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                       0.05,   0.1,   0.2,   0.5,   1.0,  2.0};

// A label value with \\, " and newlines escaped, as the text format asks.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Prometheus' float text: integers without a fraction, +Inf spelled so.
std::string number(double v) {
  return fmt::format("{}", v);
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void sample(std::string& out, const std::string& name, double v, const char* type,
            const char* help) {
  header(out, name, type, help);
  out += fmt::format("{} {}\n", name, number(v));
}

} // namespace

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void histogram::observe(double v) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  ++counts_[static_cast<size_t>(at)];
  sum_ += v;
  ++count_;
}

void histogram::render(const std::string& name, std::string& out) const {
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, number(bounds_[i]), cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, number(sum_), name, count_);
}

std::string health_report::text() const {
  switch (state) {
  case health_state::starting: return "not ready: " + (reason.empty() ? "starting" : reason);
  case health_state::ready: return "ready";
  case health_state::finished: return "not ready: the run has finished";
  case health_state::failed: return "failed: " + reason;
  }
  return "unknown";
}

run_metrics::run_metrics()
    : ttft_(ttft_buckets), tpot_(tpot_buckets), e2e_(e2e_buckets), step_(step_buckets) {
  health_.reason = "loading the model and the KV cache";
}

void run_metrics::observe(const run_progress& p) {
  std::lock_guard lock(mu_);
  for (double v : p.ttft_s)
    ttft_.observe(v);
  for (double v : p.tpot_s)
    tpot_.observe(v);
  for (double v : p.e2e_s)
    e2e_.observe(v);
  for (double v : p.step_s)
    step_.observe(v);
  last_ = p;
  last_.ttft_s.clear();
  last_.tpot_s.clear();
  last_.e2e_s.clear();
  last_.step_s.clear();
}

void run_metrics::observe_ready(const std::vector<rank_ready>& ready) {
  std::lock_guard lock(mu_);
  ready_ = ready;
}

void run_metrics::set_health(health_state state, std::string reason) {
  std::lock_guard lock(mu_);
  health_ = {state, std::move(reason)};
}

health_report run_metrics::health() const {
  std::lock_guard lock(mu_);
  return health_;
}

void run_metrics::render_ready(std::string& out) const {
  if (ready_.empty()) return;
  header(out, "kvactor:ranks_ready", "gauge", "Ranks that reported ready.");
  out += fmt::format("kvactor:ranks_ready {}\n", ready_.size());
  header(out, "kvactor:rank_kv_cache_blocks", "gauge", "KV cache blocks each rank allocated.");
  for (const auto& r : ready_)
    out += fmt::format("kvactor:rank_kv_cache_blocks{{rank=\"{}\"}} {}\n", r.rank, r.num_blocks);
  // Per rank and start-up phase: one family of samples for each value a phase reports.
  auto per_phase = [&](const char* name, const char* help, auto value) {
    header(out, name, "gauge", help);
    for (const auto& r : ready_)
      for (const auto& p : r.phases)
        out += fmt::format("{}{{rank=\"{}\",phase=\"{}\"}} {}\n", name, r.rank, label(p.phase),
                           number(value(p)));
  };
  per_phase("kvactor:rank_startup_phase_seconds",
            "Each start-up phase of each rank (cudagraph capture among them).",
            [](const phase_timing& p) { return static_cast<double>(p.duration_ns) / 1e9; });
  per_phase("kvactor:rank_startup_phase_bytes",
            "Memory each start-up phase of each rank reports allocating (KV cache, CUDA graphs).",
            [](const phase_timing& p) { return static_cast<double>(p.memory_bytes); });
  render_memory_gap(out);
}

// GPU ranks only (a CPU rank measures nothing): what cudaMemGetInfo says the device lost beyond
// the ledger, per rank and phase.
void run_metrics::render_memory_gap(std::string& out) const {
  const char* name = "kvactor:rank_device_memory_unaccounted_bytes";
  bool any = false;
  for (const auto& r : ready_)
    for (const auto& p : r.phases) {
      if (p.device_used_bytes < 0) continue;
      if (!any)
        header(out, name, "gauge",
               "Device memory a GPU rank lost since it started (cudaMemGetInfo) beyond its memory "
               "ledger, after each start-up phase: the CUDA context, library workspaces, leaks.");
      any = true;
      out += fmt::format("{}{{rank=\"{}\",phase=\"{}\"}} {}\n", name, r.rank, label(p.phase),
                         p.device_used_bytes - p.ledger_bytes);
    }
}

std::string run_metrics::prometheus_text() const {
  std::lock_guard lock(mu_);
  std::string out;
  const run_progress& p = last_;
  const double usage = p.kv_blocks_total > 0 ? static_cast<double>(p.kv_blocks_used)
                                                   / static_cast<double>(p.kv_blocks_total)
                                             : 0.0;
  sample(out, "kvactor:num_requests_running", p.running, "gauge",
         "Requests in the model's batch (vllm:num_requests_running).");
  sample(out, "kvactor:num_requests_waiting", p.waiting, "gauge",
         "Requests waiting to be scheduled (vllm:num_requests_waiting).");
  sample(out, "kvactor:kv_cache_usage_perc", usage, "gauge",
         "KV cache blocks in use, 1 = all (vllm:kv_cache_usage_perc).");
  sample(out, "kvactor:prompt_tokens_total", static_cast<double>(p.prompt_tokens), "counter",
         "Prompt tokens of the requests whose prefill ended (vllm:prompt_tokens_total).");
  sample(out, "kvactor:generation_tokens_total", static_cast<double>(p.generated_tokens), "counter",
         "Tokens generated (vllm:generation_tokens_total).");
  sample(out, "kvactor:num_preemptions_total", static_cast<double>(p.preemptions), "counter",
         "Requests preempted to free KV cache blocks (vllm:num_preemptions_total).");
  sample(out, "kvactor:request_success_total", static_cast<double>(p.finished), "counter",
         "Requests that finished (vllm:request_success_total).");
  sample(out, "kvactor:request_failure_total", static_cast<double>(p.failed), "counter",
         "Requests that failed, each with its reason in the run's summary.");
  sample(out, "kvactor:steps_total", static_cast<double>(p.steps), "counter",
         "Steps the driver sent to every rank.");
  sample(out, "kvactor:cudagraph_replays_total", static_cast<double>(p.graph_replays), "counter",
         "Steps that replayed a CUDA graph.");
  sample(out, "kvactor:eager_steps_total", static_cast<double>(p.eager_steps), "counter",
         "Steps that ran eagerly.");
  sample(out, "kvactor:prefix_cache_hit_tokens_total", static_cast<double>(p.prefix_hit_tokens),
         "counter",
         "Prompt tokens taken from the prefix cache instead of computed (vllm:prefix_cache_hits); "
         "over kvactor:prompt_tokens_total, the hit rate.");
  sample(out, "kvactor:collective_timeouts_total", static_cast<double>(p.collective_timeouts),
         "counter",
         "Ranks whose collective waited longer than --collective-timeout for their peers.");
  sample(out, "kvactor:collective_failures_total", static_cast<double>(p.collective_failures),
         "counter", "Ranks whose collective failed other than by a timeout.");
  sample(out, "kvactor:kv_cache_blocks_total", static_cast<double>(p.kv_blocks_total), "gauge",
         "KV cache blocks of the run (the null block not counted).");
  header(out, "kvactor:time_to_first_token_seconds", "histogram",
         "From a request's arrival to its first token (vllm:time_to_first_token_seconds).");
  ttft_.render("kvactor:time_to_first_token_seconds", out);
  header(out, "kvactor:time_per_output_token_seconds", "histogram",
         "Per token after the first, by finished request (vllm:time_per_output_token_seconds).");
  tpot_.render("kvactor:time_per_output_token_seconds", out);
  header(out, "kvactor:e2e_request_latency_seconds", "histogram",
         "From a request's arrival to its last token (vllm:e2e_request_latency_seconds).");
  e2e_.render("kvactor:e2e_request_latency_seconds", out);
  header(out, "kvactor:step_duration_seconds", "histogram",
         "From the driver's step plan to every rank's answer.");
  step_.render("kvactor:step_duration_seconds", out);
  sample(out, "kvactor:ready", health_.state == health_state::ready ? 1.0 : 0.0, "gauge",
         "1 while the run serves (/health answers 200).");
  render_ready(out);
  return out;
}

} // namespace kvactor
