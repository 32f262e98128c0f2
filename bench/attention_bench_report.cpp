#include "attention_bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvactor::bench {
namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// "all 8" or "64/1024" (query token, KV head) rows checked.
std::string rows_text(const case_result& r) {
  if (r.rows_checked == r.rows_total) return fmt::format("all {}", r.rows_total);
  return fmt::format("{}/{}", r.rows_checked, r.rows_total);
}

std::string met_text(const case_report& r) {
  if (r.bench.goal.kind == goal_kind::none) return "";
  return r.goal_ok ? "yes" : "NO";
}

bool measured(const case_report& r) {
  return r.result.time.replays > 0;
}

// The measured value a goal bounds, as the summary line quotes it.
std::string goal_value(const case_report& r) {
  if (!measured(r)) return "failed";
  switch (r.bench.goal.kind) {
  case goal_kind::none: return "";
  case goal_kind::max_us: return fmt::format("{:.1f} us", r.result.time.median_us);
  case goal_kind::min_copy_pct: return fmt::format("{:.1f}% of copy", r.copy_pct);
  case goal_kind::min_tflops: return fmt::format("{:.0f} TFLOP/s", r.tflops);
  }
  return "";
}

size_t peak_device_used(const report& rep) {
  size_t peak = 0;
  for (const case_report& r : rep.cases)
    peak = std::max(peak, r.result.device_used);
  return peak;
}

std::string layout_text(cache_layout l) {
  return l == cache_layout::hnd ? "HND [block, kv_head, token, K|V]"
                                : "NHD [block, token, kv_head, K|V]";
}

std::string csv_quote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s)
    out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

nlohmann::ordered_json timing_json(const timing& t) {
  return {{"median_us", t.median_us},
          {"p10_us", t.p10_us},
          {"p90_us", t.p90_us},
          {"min_us", t.min_us},
          {"replays", t.replays}};
}

nlohmann::ordered_json to_json(const report& rep) {
  nlohmann::ordered_json j;
  j["tool"] = "kvactor_attention_bench";
  j["device"] = {
      {"name", rep.device.name},         {"compute_capability", rep.device.compute_capability},
      {"sms", rep.device.sms},           {"memory_bytes", rep.device.memory_bytes},
      {"l2_bytes", rep.device.l2_bytes}, {"driver", rep.device.driver},
      {"runtime", rep.device.runtime},
  };
  j["settings"] = {{"dtype", "bf16"},
                   {"head_size", head_size},
                   {"kernel_block_size", kernel_block_size},
                   {"layout", layout_text(rep.options.layout)},
                   {"l2_flush", rep.flush},
                   {"warmup", rep.options.warmup},
                   {"replays", rep.options.replays},
                   {"check_rows", rep.options.check_rows},
                   {"pool_factor", rep.options.pool_factor},
                   {"seed", rep.options.seed},
                   {"decode_splits", rep.options.decode.splits}, // 0: planned
                   {"max_rel_l2", rep.max_rel_l2}};
  j["copy_ceiling"] = {{"bytes", rep.ceiling.bytes},
                       {"time", timing_json(rep.ceiling.time)},
                       {"tbs", rep.ceiling.tbs},
                       {"best_tbs", rep.ceiling.best_tbs}};
  j["cases"] = nlohmann::ordered_json::array();
  for (const case_report& r : rep.cases) {
    const case_result& res = r.result;
    j["cases"].push_back(
        {{"name", r.bench.name},
         {"key", r.bench.key},
         {"num_q_heads", r.bench.num_q_heads},
         {"num_kv_heads", r.bench.num_kv_heads},
         {"batch", r.bench.describe_batch()},
         {"num_tokens", r.bench.num_tokens()},
         {"kv_bytes", r.bench.kv_bytes()},
         {"flops", r.bench.flops()},
         {"time", timing_json(res.time)},
         {"kv_tbs", r.kv_tbs},
         {"copy_pct", r.copy_pct},
         {"tflops", r.tflops},
         {"rel_l2", res.rel_l2},
         {"rows_checked", res.rows_checked},
         {"rows_total", res.rows_total},
         {"nonfinite", res.nonfinite},
         {"workspace_bytes", res.workspace_bytes},
         {"device_bytes", res.device_bytes},
         {"device_used_bytes", res.device_used},
         {"goal", describe(r.bench.goal)},
         {"goal_met", r.bench.goal.kind == goal_kind::none ? nlohmann::ordered_json(nullptr)
                                                           : nlohmann::ordered_json(r.goal_ok)},
         {"anchor_vllm", r.bench.anchor},
         {"problems", r.problems},
         {"seconds", r.seconds}});
  }
  j["peak_device_used_bytes"] = peak_device_used(rep);
  j["seconds"] = rep.seconds;
  j["failures"] = failures(rep);
  j["ok"] = failures(rep).empty();
  j["summary"] = summary_line(rep);
  return j;
}

std::string to_csv(const report& rep) {
  std::string out = "case,key,num_q_heads,num_kv_heads,batch,median_us,p10_us,p90_us,min_us,"
                    "kv_tbs,copy_pct,copy_ceiling_tbs,tflops,rel_l2,rows_checked,rows_total,"
                    "nonfinite,goal,goal_met,anchor_vllm\n";
  for (const case_report& r : rep.cases) {
    const case_result& res = r.result;
    out +=
        fmt::format("{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.4f},{:.2f},{:.4f},{:.3f},{:.3e},"
                    "{},{},{},{},{},{}\n",
                    csv_quote(r.bench.name), r.bench.key, r.bench.num_q_heads, r.bench.num_kv_heads,
                    csv_quote(r.bench.describe_batch()), res.time.median_us, res.time.p10_us,
                    res.time.p90_us, res.time.min_us, r.kv_tbs, r.copy_pct, rep.ceiling.tbs,
                    r.tflops, res.rel_l2, res.rows_checked, res.rows_total, res.nonfinite,
                    csv_quote(describe(r.bench.goal)), met_text(r), csv_quote(r.bench.anchor));
  }
  return out;
}

} // namespace

case_report make_case_report(const bench_case& c, const case_result& r, const copy_ceiling& ceiling,
                             double max_rel_l2) {
  case_report out;
  out.bench = c;
  out.result = r;
  if (r.time.median_us <= 0.0) return failed_case_report(c, "no replay was timed");
  const double seconds = r.time.median_us * 1e-6;
  out.kv_tbs = c.kv_bytes() / seconds * 1e-12;
  out.copy_pct = 100.0 * out.kv_tbs / ceiling.tbs;
  out.tflops = c.flops() / seconds * 1e-12;
  out.goal_ok = goal_met(c.goal, r.time.median_us, out.copy_pct, out.tflops);
  if (r.nonfinite > 0)
    out.problems.push_back(fmt::format("{} NaN/inf values in the output", r.nonfinite));
  if (r.rows_checked == 0) out.problems.push_back("no row was checked against the reference");
  if (!std::isfinite(r.rel_l2) || r.rel_l2 > max_rel_l2)
    out.problems.push_back(
        fmt::format("relative L2 error {:.3e} against the CPU reference is above {:.1e}", r.rel_l2,
                    max_rel_l2));
  return out;
}

case_report failed_case_report(const bench_case& c, const std::string& error) {
  case_report out;
  out.bench = c;
  out.goal_ok = c.goal.kind == goal_kind::none;
  out.problems.push_back(error);
  return out;
}

void print_header(const report& rep) {
  const device_info& d = rep.device;
  const run_options& o = rep.options;
  fmt::print("kvactor_attention_bench: paged attention, bf16, head {}, kernel block {}\n",
             head_size, kernel_block_size);
  fmt::print("device: {} (cc {}, {} SMs, {:.1f} GiB, L2 {} MiB), driver {}, runtime {}\n", d.name,
             d.compute_capability, d.sms, static_cast<double>(d.memory_bytes) / gib,
             d.l2_bytes >> 20, d.driver, d.runtime);
  fmt::print("timing: one paged_attention_cuda call per CUDA graph; before each replay L2 is "
             "flushed ({}) outside the timed region; CUDA events around the replay only; median "
             "of {} replays after {} warmup\n",
             rep.flush, o.replays, o.warmup);
  fmt::print("data: random bf16 (K, V uniform in (-1, 1), q in (-2, 2)), scale 1/sqrt({}), causal; "
             "cache {}; block tables: shuffled ids over a cache {:.2g}x what the batch needs; "
             "cases named fp8: an FP8 E4M3 cache of the same values (scales 1), q and out bf16\n",
             head_size, layout_text(o.layout), o.pool_factor);
  if (o.decode.splits > 0)
    fmt::print("decode kernel: {} KV splits per (request, KV head), fixed (--decode-splits)\n",
               o.decode.splits);
  std::fflush(stdout);
}

void print_ceiling(const copy_ceiling& c) {
  fmt::print("copy ceiling: cudaMemcpyAsync device-to-device of {} MiB: {:.1f} us median (p10 "
             "{:.1f}, p90 {:.1f}) -> {:.3f} TB/s read + write (fastest replay {:.3f})\n",
             c.bytes >> 20, c.time.median_us, c.time.p10_us, c.time.p90_us, c.tbs, c.best_tbs);
  std::fflush(stdout);
}

void print_progress(size_t index, size_t count, const case_report& r) {
  const case_result& res = r.result;
  if (!measured(r)) {
    fmt::print("[{:2}/{}] {:<38} FAILED: {}\n", index, count, r.bench.name, r.problems.front());
    std::fflush(stdout);
    return;
  }
  fmt::print("[{:2}/{}] {:<38} {:9.2f} us (p10 {:.2f}, p90 {:.2f})  {:.3f} TB/s = {:.1f}% of copy"
             "  {:.1f} TFLOP/s  rel L2 {:.1e} ({} rows)  GPU {:.1f} GiB in use  {:.1f} s{}\n",
             index, count, r.bench.name, res.time.median_us, res.time.p10_us, res.time.p90_us,
             r.kv_tbs, r.copy_pct, r.tflops, res.rel_l2, rows_text(res),
             static_cast<double>(res.device_used) / gib, r.seconds,
             r.problems.empty() ? "" : "  FAILED");
  std::fflush(stdout);
}

void print_table(const report& rep) {
  fmt::print("\n{:<38} {:>9} {:>9} {:>9} {:>8} {:>7} {:>8} {:>8} {:>10}  {:<16} {:<4} {}\n", "case",
             "us p50", "us p10", "us p90", "KV TB/s", "% copy", "TFLOP/s", "rel L2", "checked",
             "goal", "met", "vLLM (anchors)");
  int met = 0, goals = 0;
  for (const case_report& r : rep.cases) {
    const case_result& res = r.result;
    if (!measured(r)) {
      fmt::print("{:<38} FAILED (see above){:>59}{:<16} {:<4} {}\n", r.bench.name, "",
                 describe(r.bench.goal), met_text(r), r.bench.anchor);
    } else {
      fmt::print(
          "{:<38} {:9.2f} {:9.2f} {:9.2f} {:8.3f} {:6.1f}% {:8.2f} {:8.1e} {:>10}  {:<16} {:<4} "
          "{}\n",
          r.bench.name, res.time.median_us, res.time.p10_us, res.time.p90_us, r.kv_tbs, r.copy_pct,
          r.tflops, res.rel_l2, rows_text(res), describe(r.bench.goal), met_text(r),
          r.bench.anchor);
    }
    if (r.bench.goal.kind != goal_kind::none) {
      ++goals;
      met += r.goal_ok ? 1 : 0;
    }
  }
  fmt::print(
      "\ncopy ceiling {:.3f} TB/s (median; read + write bytes). KV TB/s: K+V bytes read once "
      "(sum of context x kv_heads x {} x 2 B x 2) over the median; % copy: of the ceiling.\n"
      "TFLOP/s: decode 4.ctx.h.d per query; prefill 4.b.h.s^2.d/2 (the anchors' count); mixed: "
      "decodes plus the exact causal work of its chunks, 4.h.d.sum_i(cached + i + 1).\n"
      "checked: (query token, KV head) rows, each with all q heads of its group and every visible "
      "key, compared with paged_attention (CPU, float) on the same bf16 data; all rows when there "
      "are at most {}, else {} random ones (seed {}; half from decodes, half from chunks when "
      "the batch has both). rel L2 = ||gpu - ref|| / ||ref|| over them; the whole output is "
      "scanned for NaN/inf.\n",
      rep.ceiling.tbs, head_size, rep.options.check_rows, rep.options.check_rows, rep.options.seed);
  fmt::print("goals met: {}/{}; peak GPU memory in use {:.1f} GiB (cudaMemGetInfo; limit 60); "
             "wall time {:.1f} s\n",
             met, goals, static_cast<double>(peak_device_used(rep)) / gib, rep.seconds);
  for (const std::string& f : failures(rep))
    fmt::print("FAILED: {}\n", f);
  std::fflush(stdout);
}

void write_results(const report& rep, const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  if (csv)
    f << to_csv(rep);
  else
    f << to_json(rep).dump(2) << "\n";
  if (!f) throw std::runtime_error("cannot write " + path);
  fmt::print("results written to {}\n", path);
}

std::string summary_line(const report& rep) {
  std::string line = fmt::format("attention: copy {:.2f} TB/s", rep.ceiling.tbs);
  int met = 0, goals = 0;
  double worst = 0.0;
  for (const case_report& r : rep.cases) {
    if (measured(r))
      worst = std::isfinite(r.result.rel_l2) ? std::max(worst, r.result.rel_l2) : r.result.rel_l2;
    if (r.bench.goal.kind == goal_kind::none) continue;
    ++goals;
    met += r.goal_ok ? 1 : 0;
    line += fmt::format(" | {} {} ({})", r.bench.key, goal_value(r), describe(r.bench.goal));
  }
  line += fmt::format(" | goals met {}/{} | max rel L2 {:.1e} | {}", met, goals, worst,
                      failures(rep).empty() ? "ok" : "FAILED");
  return line;
}

std::vector<std::string> failures(const report& rep) {
  std::vector<std::string> out;
  for (const case_report& r : rep.cases)
    for (const std::string& p : r.problems)
      out.push_back(r.bench.name + ": " + p);
  return out;
}

} // namespace kvactor::bench
