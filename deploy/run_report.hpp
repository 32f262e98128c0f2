// What `kvactor run` prints and writes: the progress line, the summary, the trace and the
// --summary-json file; and the exit code that goes with them.
#pragma once

#include <fstream>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "actors/driver/actor.hpp"
#include "actors/trace_recorder.hpp"
#include "deploy/metrics_server.hpp"
#include "deploy/run_command.hpp"
#include "deploy/run_config.hpp"
#include "deploy/run_session.hpp"

namespace kvactor {

/// --record FILE: the trace file and its recorder (the workload recorded as the client's).
struct recording {
  std::string path;
  std::ofstream file;
  std::shared_ptr<trace_recorder> recorder;
};

/// Opens --record's file (none when `path` is empty); an error names the flag and the file.
expected<std::unique_ptr<recording>> open_recording(const std::string& path,
                                                    const std::vector<request_spec>& workload);

/// The progress line on a terminal (at most every 100 ms, and when the last request ends);
/// nothing when `show` is false.
std::function<void(const run_progress&)> progress_printer(bool show, std::ostream& err);

/// vLLM's periodic stats line over the interval from `before` to `now` (dt seconds): "Avg prompt
/// throughput: 1234.5 tokens/s, Avg generation throughput: 67.8 tokens/s, Running: 3 reqs,
/// Waiting: 0 reqs, GPU KV cache usage: 1.2%" ("KV cache usage" on a CPU).
std::string stats_line(const run_progress& before, const run_progress& now, double dt,
                       device_kind device);

/// What the driver reports after each step: the progress line (show_progress, on a terminal),
/// and the stats line at info level every stats_interval_s seconds (0: never) and when the
/// last request ends, on any output. Empty when neither is wanted.
std::function<void(const run_progress&)> progress_callbacks(bool show_progress,
                                                            double stats_interval_s,
                                                            device_kind device, std::ostream& err);

/// --metrics-port of a run, local or on a cluster: the metrics and their server, answering
/// /health ("not ready") from before the model loads. Without the flag every call is a no-op.
struct served_metrics {
  std::shared_ptr<run_metrics> metrics; // null without --metrics-port
  std::unique_ptr<metrics_server> server;

  /// `progress` that also feeds the metrics.
  std::function<void(const run_progress&)>
  observing(std::function<void(const run_progress&)> progress) const;
  void ready(const std::vector<rank_ready>& ranks) const;
  void failed(const std::string& why) const;
  void ended(const session_result& s) const; // finished, or failed with the session's reason
};

/// Starts serving when the flags ask for it; an error names the flag and the address.
expected<served_metrics> serve_metrics(const run_flags& flags);

/// "kvactor run: MODEL on DEVICE (N rank(s), U ubatch(es)), B blocks of KV cache, R requests".
void print_run_header(const run_configuration& run, const std::vector<rank_ready>& ready,
                      std::ostream& out);

/// The restarts of a cluster run (--restart-policy rebuild): what each rebuild followed.
struct restart_log {
  int restarts = 0;
  std::vector<std::string> lost;
};

/// Prints the summary (or the failure), closes the trace, writes --summary-json; the exit code:
/// the failure's, else 1 when the run stopped early or a file could not be written, else 0.
int report_run(const run_flags& flags, const run_configuration& run, const session_result& s,
               const restart_log& restarts, recording* rec, std::ostream& out, std::ostream& err);

} // namespace kvactor
