// What kvactor_attention_bench prints and writes: the header, one progress line per case, the
// table with the goals, the results file (JSON or CSV) and the one-line summary.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "attention_bench_cases.hpp"
#include "attention_bench_run.hpp"
#include "bench_gpu.hpp"

namespace kvactor::bench {

struct device_info {
  std::string name, compute_capability, driver, runtime;
  int sms = 0;
  size_t memory_bytes = 0, l2_bytes = 0;
};

/// One case's measurements and the figures derived from them.
struct case_report {
  bench_case bench;
  case_result result;
  double kv_tbs = 0.0;   // kv_bytes over the median
  double copy_pct = 0.0; // kv_tbs as a percentage of the copy ceiling
  double tflops = 0.0;   // flops over the median
  bool goal_ok = true;
  std::vector<std::string> problems; // why the case fails the run: NaN/inf, reference mismatch
  double seconds = 0.0;              // wall time of the case, setup and check included
};

case_report make_case_report(const bench_case& c, const case_result& r, const copy_ceiling& ceiling,
                             double max_rel_l2);
/// A case that did not complete: `error` is its one problem, it has no measurements.
case_report failed_case_report(const bench_case& c, const std::string& error);

struct report {
  device_info device;
  run_options options;
  std::string flush; // l2_flusher::describe()
  double max_rel_l2 = 0.0;
  copy_ceiling ceiling;
  std::vector<case_report> cases;
  double seconds = 0.0;
};

void print_header(const report& rep);
void print_ceiling(const copy_ceiling& c);
/// "[ 3/10] decode 128x4096 32/8  ...": one line, flushed.
void print_progress(size_t index, size_t count, const case_report& r);
/// The table, goals beside the results, the notes that define each column, and any failures.
void print_table(const report& rep);
/// Writes JSON, or CSV when path ends in ".csv". Throws std::runtime_error when it cannot.
void write_results(const report& rep, const std::string& path);
/// "attention: copy 4.26 TB/s | decode1x4096 6.1 us | ... | goals met 6/6 | ok".
std::string summary_line(const report& rep);
/// Every problem of every case, prefixed by the case's name.
std::vector<std::string> failures(const report& rep);

} // namespace kvactor::bench
