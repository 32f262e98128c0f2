// The log lines an operator of vLLM looks for, in a run whose output is not a terminal: the KV
// cache lines at start-up (the plan's figures) and the periodic stats line.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli_support.hpp"
#include "deploy/log_format.hpp"
#include "deploy/run_report.hpp"

namespace kvactor::test {
namespace {

// Everything logged through the "kvactor" logger while it lives (kvactor_main keeps a logger of
// that name), then the usual stderr logger again.
class captured_log {
public:
  captured_log() {
    spdlog::drop("kvactor");
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("kvactor", sink));
  }
  ~captured_log() {
    spdlog::drop("kvactor");
    spdlog::set_default_logger(spdlog::stderr_color_mt("kvactor"));
  }
  std::string text() const { return text_.str(); }

private:
  std::ostringstream text_;
};

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

TEST(RunLogs, TheStatsLineReadsLikeVllms) {
  run_progress before, now;
  before.elapsed_s = 1.0;
  before.prompt_tokens = 100;
  before.generated_tokens = 10;
  now.elapsed_s = 3.0;
  now.prompt_tokens = 2100;
  now.generated_tokens = 110;
  now.running = 7;
  now.waiting = 2;
  now.kv_blocks_used = 25;
  now.kv_blocks_total = 1000;
  EXPECT_EQ(stats_line(before, now, 2.0, device_kind::cuda),
            "Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: 50.0 tokens/s, "
            "Running: 7 reqs, Waiting: 2 reqs, GPU KV cache usage: 2.5%");
  // A preemption takes prompt tokens back: the throughput never goes negative.
  now.prompt_tokens = 50;
  EXPECT_NE(stats_line(before, now, 2.0, device_kind::cpu).find("Avg prompt throughput: 0.0"),
            std::string::npos);
  EXPECT_NE(stats_line(before, now, 2.0, device_kind::cpu).find(", KV cache usage: 2.5%"),
            std::string::npos);
}

TEST(RunLogs, ARunLogsTheKvCacheLinesOfItsPlanAndAStatsLineAtInfoLevel) {
  captured_log log;
  auto r = run_cli({"run", "--device", "cpu", "--log-level", "info", "--no-progress", "--requests",
                    "24", "--stats-interval", "0.02", "--kv-cache-memory", "256MiB"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string text = log.text();
  EXPECT_NE(text.find("Available KV cache memory: 0.25 GiB"), std::string::npos) << text;
  // The same figures as `kvactor plan` prints for this budget.
  auto plan = run_cli({"plan", "--model", "kvactor-tiny", "--kv-cache-memory", "256MiB", "--device",
                       "cpu", "--json"});
  ASSERT_EQ(plan.code, 0) << plan.err;
  const auto j = plan.json();
  EXPECT_NE(text.find("CPU KV cache size: 130,561 tokens"), std::string::npos) << text;
  EXPECT_EQ(j["kv_cache_tokens"], 130561);
  EXPECT_NE(text.find("Maximum concurrency for 2,048 tokens per request: 63.75x"),
            std::string::npos)
      << text;
  const std::regex stats(R"(Avg prompt throughput: [0-9.]+ tokens/s, Avg generation )"
                         R"(throughput: [0-9.]+ tokens/s, Running: [0-9]+ reqs, Waiting: [0-9]+ )"
                         R"(reqs, KV cache usage: [0-9.]+%)");
  EXPECT_TRUE(std::regex_search(text, stats)) << text;
  // The last one, when every request has ended, comes once.
  EXPECT_EQ(count(text, "Running: 0 reqs, Waiting: 0 reqs"), 1) << text;
}

TEST(RunLogs, DisableLogStatsKeepsTheStatsLineOut) {
  captured_log log;
  auto r = run_cli({"run", "--device", "cpu", "--log-level", "info", "--no-progress", "--requests",
                    "4", "--disable-log-stats"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(log.text().find("Avg prompt throughput"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("KV cache size"), std::string::npos) << log.text();
}

TEST(RunLogs, AJsonLogLineCarriesTimeLevelMessageAndTheRequestItNames) {
  const auto t = std::chrono::system_clock::time_point{} + std::chrono::milliseconds(1764824513885);
  const auto line =
      json_log_line(t, "warning", "kvactor", "driver: request 42 failed at admission: \"x\"\n");
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2025-12-04T05:01:53.885Z");
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["logger"], "kvactor");
  EXPECT_EQ(j["message"], "driver: request 42 failed at admission: \"x\"\n");
  EXPECT_EQ(j["request_id"], 42);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line per record";
  EXPECT_FALSE(nlohmann::json::parse(json_log_line(t, "info", "kvactor", "rank 0: weights"))
                   .contains("request_id"));
  // Bytes that are not UTF-8 are replaced, not thrown.
  EXPECT_NO_THROW(nlohmann::json::parse(json_log_line(t, "info", "kvactor", "bad \xff byte")));
}

TEST(RunLogs, LogFormatJsonWritesOneParsableObjectPerLine) {
  captured_log log;
  auto r = run_cli({"--log-format", "json", "--log-level", "info", "run", "--device", "cpu",
                    "--no-progress", "--requests", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(log.text());
  int parsed = 0;
  bool capacity = false;
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j["level"], "info") << line;
    capacity = capacity || j["message"].get<std::string>().starts_with("CPU KV cache size");
    ++parsed;
  }
  EXPECT_GT(parsed, 5);
  EXPECT_TRUE(capacity) << log.text();
  auto bad = run_cli({"--log-format", "xml", "run"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--log-format: unknown value 'xml'"), std::string::npos) << bad.err;
}

} // namespace
} // namespace kvactor::test
