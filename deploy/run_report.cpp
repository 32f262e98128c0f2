#include "deploy/run_report.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>

#include "deploy/cli.hpp"
#include "deploy/interrupt.hpp"
#include "deploy/workload.hpp"
#include "messages/byte_size.hpp"

namespace kvactor {

expected<std::unique_ptr<recording>> open_recording(const std::string& path,
                                                    const std::vector<request_spec>& workload) {
  if (path.empty()) return std::unique_ptr<recording>{};
  auto rec = std::make_unique<recording>();
  rec->path = path;
  rec->file.open(path, std::ios::binary | std::ios::trunc);
  if (!rec->file)
    return make_error(errc::io_error, fmt::format("--record: cannot write '{}'", path));
  rec->recorder = std::make_shared<trace_recorder>(rec->file);
  for (const auto& r : workload)
    rec->recorder->record("client", "driver", r);
  return rec;
}

std::function<void(const run_progress&)> progress_printer(bool show, std::ostream& err) {
  if (!show) return {};
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  auto ended = std::make_shared<bool>(false);
  return [last, ended, &err](const run_progress& pr) {
    const auto now = std::chrono::steady_clock::now();
    const bool done = pr.finished + pr.failed >= pr.total;
    if (*ended || (!done && now - *last < std::chrono::milliseconds(100))) return;
    *last = now;
    // Generated tokens only (the summary's tok/s adds the prompt's), so the label says so.
    fmt::print(err,
               "\r  step {:>6}  requests {:>5}/{} done ({} failed)  {:>8} generated  {:>8.1f} "
               "generated tok/s",
               pr.steps, pr.finished + pr.failed, pr.total, pr.failed, pr.generated_tokens,
               pr.elapsed_s > 0 ? static_cast<double>(pr.generated_tokens) / pr.elapsed_s : 0.0);
    if (done) {
      fmt::print(err, "\n"); // the last line, once: later reports change nothing
      *ended = true;
    }
    err.flush();
  };
}

std::string stats_line(const run_progress& before, const run_progress& now, double dt,
                       device_kind device) {
  const double prompt =
      dt > 0
          ? static_cast<double>(std::max<int64_t>(0, now.prompt_tokens - before.prompt_tokens)) / dt
          : 0.0;
  const double generated =
      dt > 0 ? static_cast<double>(now.generated_tokens - before.generated_tokens) / dt : 0.0;
  const double usage = now.kv_blocks_total > 0 ? 100.0 * static_cast<double>(now.kv_blocks_used)
                                                     / static_cast<double>(now.kv_blocks_total)
                                               : 0.0;
  return fmt::format("Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} "
                     "tokens/s, Running: {} reqs, Waiting: {} reqs, {}KV cache usage: {:.1f}%",
                     prompt, generated, now.running, now.waiting,
                     device == device_kind::cuda ? "GPU " : "", usage);
}

std::function<void(const run_progress&)> progress_callbacks(bool show_progress,
                                                            double stats_interval_s,
                                                            device_kind device, std::ostream& err) {
  auto printer = progress_printer(show_progress, err);
  if (stats_interval_s <= 0) return printer;
  auto last = std::make_shared<run_progress>();
  return [printer, last, stats_interval_s, device](const run_progress& pr) {
    if (printer) printer(pr);
    const double dt = pr.elapsed_s - last->elapsed_s;
    const bool done = pr.finished + pr.failed >= pr.total;
    const bool logged_done = last->total > 0 && last->finished + last->failed >= last->total;
    if ((dt < stats_interval_s && !done) || logged_done) return;
    spdlog::info("{}", stats_line(*last, pr, dt, device));
    *last = pr;
  };
}

std::function<void(const run_progress&)>
served_metrics::observing(std::function<void(const run_progress&)> progress) const {
  if (!metrics) return progress;
  return [progress = std::move(progress), m = metrics](const run_progress& p) {
    if (progress) progress(p);
    m->observe(p);
  };
}

void served_metrics::ready(const std::vector<rank_ready>& ranks) const {
  if (!metrics) return;
  metrics->observe_ready(ranks);
  metrics->set_health(health_state::ready);
}

void served_metrics::failed(const std::string& why) const {
  if (metrics) metrics->set_health(health_state::failed, why);
}

void served_metrics::ended(const session_result& s) const {
  if (!metrics) return;
  if (s.failure)
    metrics->set_health(health_state::failed, s.failure->err.message);
  else
    metrics->set_health(health_state::finished);
}

expected<served_metrics> serve_metrics(const run_flags& flags) {
  served_metrics out;
  if (!flags.metrics_port) return out;
  out.metrics = std::make_shared<run_metrics>();
  auto server = metrics_server::start(out.metrics, flags.metrics_host, *flags.metrics_port);
  if (!server) return server.err();
  out.server = std::move(*server);
  spdlog::info("metrics: http://{}:{}/metrics and /health", flags.metrics_host, out.server->port());
  return out;
}

void print_run_header(const run_configuration& run, const std::vector<rank_ready>& ready,
                      std::ostream& out) {
  const auto& c = run.configs.front();
  fmt::print(out,
             "kvactor run: {} on {} ({} rank(s), {} ubatch(es)), {} blocks of KV cache, {} "
             "requests\n",
             c.model, to_string(run.device), run.configs.size(), c.num_ubatches,
             ready.front().num_blocks, run.workload.size());
  out.flush(); // seen at once, even in a file, and kept if the process is killed
}

namespace {

void print_summary(const run_summary& s, std::ostream& out) {
  const double tok_s =
      s.wall_s > 0 ? static_cast<double>(s.prompt_tokens + s.generated_tokens) / s.wall_s : 0.0;
  fmt::print(out, "requests   {} finished, {} failed, {} preemptions\n", s.finished, s.failed,
             s.preempted);
  for (const auto& r : s.results)
    if (!r.finished) fmt::print(out, "  request {} failed: {}\n", r.request_id, r.failure);
  fmt::print(out, "tokens     {} prompt, {} generated, {:.1f} tok/s over {:.2f} s\n",
             s.prompt_tokens, s.generated_tokens, tok_s, s.wall_s);
  const double prompt_s = s.wall_s > 0 ? static_cast<double>(s.prompt_tokens) / s.wall_s : 0.0;
  const double gen_s = s.wall_s > 0 ? static_cast<double>(s.generated_tokens) / s.wall_s : 0.0;
  fmt::print(out, "throughput prompt {:.1f} tok/s, generated {:.1f} tok/s\n", prompt_s, gen_s);
  fmt::print(out,
             "latency    TTFT p50 {:.2f} ms p99 {:.2f} ms, TPOT p50 {:.2f} ms p99 {:.2f} ms\n"
             "           end-to-end p50 {:.2f} ms p99 {:.2f} ms\n",
             s.ttft_ms_p50, s.ttft_ms_p99, s.tpot_ms_p50, s.tpot_ms_p99, s.e2e_ms_p50,
             s.e2e_ms_p99);
  fmt::print(out, "steps      {} (p50 {:.2f} ms, p99 {:.2f} ms)\n", s.steps, s.step_ms_p50,
             s.step_ms_p99);
  fmt::print(out, "kv blocks  peak {} used of {}\n", s.kv_blocks_peak_used, s.kv_blocks_total);

  fmt::print(out, "graphs     {} replays, {} eager steps\n", s.graph_replays, s.eager_steps);
}

// With hits: how many prompt tokens the cache served, against the ideal for the workload (a cache
// that never evicts, requests one after another).
void print_prefix_cache(const run_configuration& run, const run_summary& s, std::ostream& out) {
  if (s.prefix_hit_tokens <= 0) return;
  const double pct = s.prompt_tokens > 0 ? 100.0 * static_cast<double>(s.prefix_hit_tokens)
                                               / static_cast<double>(s.prompt_tokens)
                                         : 0.0;
  fmt::print(out, "prefix     {} of {} prompt tokens from the cache ({:.1f}%; ideal {})\n",
             s.prefix_hit_tokens, s.prompt_tokens, pct,
             ideal_prefix_hit_tokens(run.workload, run.configs.front().block_size));
}

// Empty when the first group was lost while starting (then rebuilt).
void print_ready(const run_configuration& run, const session_result& s, std::ostream& out) {
  if (s.ready.empty()) return;
  const auto& phases = s.ready.front().phases;
  auto capture = std::find_if(phases.begin(), phases.end(),
                              [](const phase_timing& p) { return p.phase == "cudagraph capture"; });
  const bool lazy =
      s.ready.front().graphs.mode != cudagraph_mode::none && run.configs.front().cudagraph_lazy;
  fmt::print(out, "ready in   {:.2f} s (model, weights, KV cache{})\n", s.ready_s,
             capture != phases.end() ? ", graph capture"
             : lazy                  ? ", graphs captured lazily later"
                                     : "");
  if (capture != phases.end())
    fmt::print(out, "           graph capture {:.2f} s, {} in graphs\n",
               static_cast<double>(capture->duration_ns) / 1e9,
               format_bytes(capture->memory_bytes));
}

int write_files(const run_flags& flags, const run_configuration& run, const session_result& s,
                recording* rec, std::ostream& out, std::ostream& err) {
  if (rec) {
    if (auto why = rec->recorder->failure(); !why.empty()) {
      fmt::print(err, "kvactor run: error: --record: {}\n", why);
      return exit_failure;
    }
    fmt::print(out, "trace      {} messages in {}\n", rec->recorder->count(), rec->path);
  }
  if (flags.summary_json.empty()) return exit_ok;
  std::ofstream f(flags.summary_json);
  f << summary_json(s.summary, std::string{to_string(run.device)},
                    static_cast<int32_t>(run.configs.size()), flags.ubatches, s.ready_s, s.ready)
    << '\n';
  if (f) return exit_ok;
  fmt::print(err, "kvactor run: error: --summary-json: cannot write '{}'\n", flags.summary_json);
  return exit_failure;
}

} // namespace

int report_run(const run_flags& flags, const run_configuration& run, const session_result& s,
               const restart_log& restarts, recording* rec, std::ostream& out, std::ostream& err) {
  if (rec) {
    rec->recorder->record("driver", "client", s.summary);
    rec->file.flush();
  }
  if (s.failure) {
    fmt::print(err, "kvactor run: error: {}\n", s.failure->err.message);
    return s.failure->exit_code;
  }
  print_summary(s.summary, out);
  print_prefix_cache(run, s.summary, out);
  print_ready(run, s, out);
  if (restarts.restarts > 0)
    fmt::print(out, "restarts   {} (the group was rebuilt after: {})\n", restarts.restarts,
               fmt::join(restarts.lost, "; "));
  fmt::print(out, "digest     {}\n", s.summary.output_digest);
  if (auto code = write_files(flags, run, s, rec, out, err); code != exit_ok) return code;
  if (s.summary.error.code != errc::no_error) {
    // e.g. a collective failed: the summary above lists every request
    fmt::print(err, "kvactor run: error: {}\n", s.summary.error.message);
    return exit_failure;
  }
  if (s.interrupted != 0) {
    fmt::print(err, "kvactor run: error: interrupted by {}: {} of {} requests did not finish\n",
               signal_name(s.interrupted), s.summary.failed, s.summary.failed + s.summary.finished);
    return 128 + s.interrupted;
  }
  // As vLLM's benchmarks: a run that failed a request is not a success (each is listed above).
  if (s.summary.failed > 0) {
    fmt::print(err, "kvactor run: error: {} of {} requests failed\n", s.summary.failed,
               s.summary.failed + s.summary.finished);
    return exit_failure;
  }
  return exit_ok;
}

} // namespace kvactor
