// kvactor_attention_bench: paged_attention_cuda on the device against the copy ceiling measured in
// the same run, on the shapes of the H200 anchors, with the goals next to the results.
// Prints one progress line per case, a table, and one parseable summary line; --out FILE also
// writes the results as JSON (or CSV when FILE ends in .csv; --out may repeat). Without a CUDA
// device it says so and exits 0. Exits 1 when a CUDA call fails or an output holds NaN/inf or
// misses the reference.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "attention_bench_cases.hpp"
#include "attention_bench_report.hpp"
#include "attention_bench_run.hpp"
#include "bench_gpu.hpp"

namespace kvactor::bench {
namespace {

struct cli_options {
  run_options run;
  std::vector<std::string> out;   // result files
  std::vector<std::string> cases; // substrings of case keys; empty: every case
  std::string layout = "hnd";
  std::string flush = "write";
  size_t flush_mib = 256;
  size_t copy_mib = 2048;
  double max_rel_l2 = 1e-2;
};

bool selected(const bench_case& c, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const std::string& f : filters) {
    // "key$": that key alone; else any key containing f.
    const bool exact = !f.empty() && f.back() == '$';
    if (exact ? c.key == f.substr(0, f.size() - 1) : c.key.find(f) != std::string::npos)
      return true;
  }
  return false;
}

// The --cases filters that select no case (a typo, or a key this build does not have): refused
// before any device work, so that a run never reports nothing as if it had measured.
std::vector<std::string> unmatched_filters(const std::vector<std::string>& filters) {
  std::vector<std::string> unmatched;
  const std::vector<bench_case> all = default_cases();
  for (const std::string& f : filters)
    if (std::none_of(all.begin(), all.end(), [&](const bench_case& c) { return selected(c, {f}); }))
      unmatched.push_back(f);
  return unmatched;
}

device_info probe_device() {
  device_info d;
  int dev = 0, driver = 0, runtime = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  d.name = prop.name;
  d.sms = prop.multiProcessorCount;
  d.memory_bytes = prop.totalGlobalMem;
  d.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  d.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
  d.driver = fmt::format("{}.{}", driver / 1000, driver % 1000 / 10);
  d.runtime = fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10);
  return d;
}

int run(const cli_options& cli) {
  const auto started = std::chrono::steady_clock::now();
  report rep;
  rep.device = probe_device();
  rep.options = cli.run;
  rep.max_rel_l2 = cli.max_rel_l2;

  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  l2_flusher flush(cli.flush_mib << 20, cli.flush == "read" ? flush_mode::read : flush_mode::write);
  rep.flush = flush.describe();
  print_header(rep);

  rep.ceiling =
      measure_copy_ceiling(cli.copy_mib << 20, stream, flush, cli.run.warmup, cli.run.replays);
  print_ceiling(rep.ceiling);

  std::vector<bench_case> cases;
  for (bench_case& c : default_cases())
    if (selected(c, cli.cases)) cases.push_back(std::move(c));
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    case_report r;
    try {
      r = make_case_report(cases[i], run_case(cases[i], cli.run, flush, stream), rep.ceiling,
                           cli.max_rel_l2);
    } catch (const std::exception& e) {
      // Recorded, and the next case tried: after a sticky error it fails at once as well.
      (void)cudaGetLastError();
      r = failed_case_report(cases[i], e.what());
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_progress(i + 1, cases.size(), r);
    rep.cases.push_back(std::move(r));
  }
  (void)cudaStreamDestroy(stream);

  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  print_table(rep);
  for (const std::string& path : cli.out)
    write_results(rep, path);
  std::printf("%s\n", summary_line(rep).c_str());
  return failures(rep).empty() ? 0 : 1;
}

} // namespace
} // namespace kvactor::bench

int main(int argc, char** argv) {
  using namespace kvactor::bench;
  cli_options cli;
  CLI::App app{"kvactor_attention_bench: paged_attention_cuda against the device's copy ceiling, "
               "on the H200 anchors' shapes, with the goals"};
  app.add_option("--out", cli.out,
                 "write the results to FILE: JSON, or CSV when it ends in .csv (repeatable)");
  app.add_option("--replays", cli.run.replays, "timed graph replays per case (median of them)")
      ->check(CLI::Range(50, 100000));
  app.add_option("--warmup", cli.run.warmup, "untimed replays first")->check(CLI::Range(0, 1000));
  app.add_option("--check-rows", cli.run.check_rows,
                 "(query token, KV head) rows per case compared with the CPU reference")
      ->check(CLI::Range(1, 512));
  app.add_option("--layout", cli.layout,
                 "cache layout: hnd = [block, kv_head, token, K|V] (kvactor's default), "
                 "nhd = [block, token, kv_head, K|V] (vLLM's page ordering)")
      ->check(CLI::IsMember({"hnd", "nhd"}));
  app.add_option("--flush", cli.flush,
                 "L2 flush before each replay: write = memset (the anchors' method), read = "
                 "memset then a read of another buffer, leaving L2 clean")
      ->check(CLI::IsMember({"write", "read"}));
  app.add_option("--flush-mib", cli.flush_mib, "L2 flush buffer size")
      ->check(CLI::Range(120, 4096));
  app.add_option("--copy-mib", cli.copy_mib, "bytes of the copy ceiling's cudaMemcpyAsync")
      ->check(CLI::Range(1024, 16384));
  app.add_option("--cases", cli.cases,
                 "run only cases whose key contains one of these (KEY$: that key alone)")
      ->delimiter(',');
  app.add_option("--seed", cli.run.seed, "seed of the random data and block tables");
  app.add_option("--max-rel-l2", cli.max_rel_l2, "fail a case whose relative L2 error is above");
  app.add_option("--decode-splits", cli.run.decode.splits,
                 "KV splits per (request, KV head) of the decode kernel; 0 plans them")
      ->check(CLI::Range(0, 64));
  CLI11_PARSE(app, argc, argv);
  cli.run.layout = cli.layout == "nhd" ? cache_layout::nhd : cache_layout::hnd;

  if (const auto unmatched = unmatched_filters(cli.cases); !unmatched.empty()) {
    std::fprintf(stderr, "kvactor_attention_bench: --cases: %s selects no case\n",
                 fmt::format("{}", fmt::join(unmatched, ", ")).c_str());
    return 2;
  }
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  if (probe != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    std::printf(
        "no CUDA device: %s; kvactor_attention_bench skipped\n",
        probe != cudaSuccess
            ? fmt::format("{} ({})", cudaGetErrorString(probe), cudaGetErrorName(probe)).c_str()
            : "cudaGetDeviceCount found none");
    return 0;
  }
  try {
    return run(cli);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "kvactor_attention_bench: %s\n", e.what());
    return 1;
  }
}
