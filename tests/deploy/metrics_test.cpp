// --metrics-port: the Prometheus text a run serves (every line in the exposition format, the
// histograms cumulative), its /health, and a live run scraped while its counters move.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <httplib.h>

#include "cli_support.hpp"
#include "deploy/run_metrics.hpp"

namespace kvactor::test {
namespace {

// Parses Prometheus' text format strictly: # HELP / # TYPE lines, then samples
// "name{labels} value"; fails the test on any other line. Returns sample -> value.
std::map<std::string, double> parse_exposition(const std::string& text) {
  static const std::regex sample_line(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_]+="[^"]*"(,[a-zA-Z_]+="[^"]*")*\})?) ([-+0-9.eE]+|\+Inf|NaN))");
  static const std::regex comment_line(R"(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+)");
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string declared;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, comment_line)) continue;
    EXPECT_TRUE(std::regex_match(line, m, sample_line)) << "not exposition format: " << line;
    if (m.empty()) continue;
    samples[m[1].str()] = std::stod(m[4].str());
  }
  return samples;
}

TEST(RunMetrics, EveryLineIsExpositionFormatAndHistogramsAreCumulative) {
  run_metrics metrics;
  run_progress p;
  p.running = 3;
  p.waiting = 1;
  p.kv_blocks_used = 10;
  p.kv_blocks_total = 40;
  p.generated_tokens = 7;
  p.ttft_s = {0.003, 0.03, 3.0};
  p.e2e_s = {0.4};
  metrics.observe(p);
  const auto s = parse_exposition(metrics.prometheus_text());
  EXPECT_EQ(s.at("kvactor:num_requests_running"), 3);
  EXPECT_EQ(s.at("kvactor:num_requests_waiting"), 1);
  EXPECT_EQ(s.at("kvactor:kv_cache_usage_perc"), 0.25);
  EXPECT_EQ(s.at("kvactor:generation_tokens_total"), 7);
  EXPECT_EQ(s.at("kvactor:time_to_first_token_seconds_bucket{le=\"0.001\"}"), 0);
  EXPECT_EQ(s.at("kvactor:time_to_first_token_seconds_bucket{le=\"0.005\"}"), 1);
  EXPECT_EQ(s.at("kvactor:time_to_first_token_seconds_bucket{le=\"0.04\"}"), 2);
  EXPECT_EQ(s.at("kvactor:time_to_first_token_seconds_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(s.at("kvactor:time_to_first_token_seconds_count"), 3);
  EXPECT_DOUBLE_EQ(s.at("kvactor:time_to_first_token_seconds_sum"), 3.033);
  EXPECT_EQ(s.at("kvactor:e2e_request_latency_seconds_bucket{le=\"0.5\"}"), 1);
  // A later report adds its events; gauges follow the latest.
  run_progress q = p;
  q.running = 0;
  q.ttft_s = {0.5};
  q.e2e_s.clear();
  metrics.observe(q);
  const auto t = parse_exposition(metrics.prometheus_text());
  EXPECT_EQ(t.at("kvactor:num_requests_running"), 0);
  EXPECT_EQ(t.at("kvactor:time_to_first_token_seconds_count"), 4);
  EXPECT_EQ(t.at("kvactor:e2e_request_latency_seconds_count"), 1);
}

TEST(RunMetrics, CollectiveTimeoutsFailuresAndPrefixCacheHitsAreCounters) {
  run_metrics metrics;
  auto s = parse_exposition(metrics.prometheus_text());
  EXPECT_EQ(s.at("kvactor:collective_timeouts_total"), 0);
  run_progress p;
  p.collective_timeouts = 3; // three ranks waited in vain for the fourth
  p.collective_failures = 1;
  p.prefix_hit_tokens = 480;
  metrics.observe(p);
  s = parse_exposition(metrics.prometheus_text());
  EXPECT_EQ(s.at("kvactor:prefix_cache_hit_tokens_total"), 480);
  EXPECT_EQ(s.at("kvactor:collective_timeouts_total"), 3);
  EXPECT_EQ(s.at("kvactor:collective_failures_total"), 1);
}

TEST(RunMetrics, TheLedgerGapToCudaMemGetInfoIsReportedForMeasuredPhasesOnly) {
  run_metrics metrics;
  rank_ready gpu;
  gpu.rank = 1;
  gpu.phases = {{"weights", 1000, 0, 16'000, 16'500},
                {"kv_cache.allocate", 2000, 4'000, 20'000, 21'000}};
  rank_ready cpu;
  cpu.rank = 0;
  cpu.phases = {{"weights", 1000, 0, 16'000}}; // a CPU rank measures nothing: -1
  metrics.observe_ready({cpu, gpu});
  const auto s = parse_exposition(metrics.prometheus_text());
  const std::string name = "kvactor:rank_device_memory_unaccounted_bytes";
  EXPECT_EQ(s.at(name + "{rank=\"1\",phase=\"weights\"}"), 500);
  EXPECT_EQ(s.at(name + "{rank=\"1\",phase=\"kv_cache.allocate\"}"), 1000);
  EXPECT_EQ(s.count(name + "{rank=\"0\",phase=\"weights\"}"), 0u);
}

TEST(RunMetrics, HealthIsReadyOnlyWhileTheRunServesAndSaysWhyNot) {
  run_metrics metrics;
  EXPECT_EQ(metrics.health().http_status(), 503);
  EXPECT_EQ(metrics.health().text(), "not ready: loading the model and the KV cache");
  metrics.set_health(health_state::ready);
  EXPECT_EQ(metrics.health().http_status(), 200);
  EXPECT_EQ(metrics.health().text(), "ready");
  metrics.set_health(health_state::failed, "rank[1] lost");
  EXPECT_EQ(metrics.health().http_status(), 503);
  EXPECT_EQ(metrics.health().text(), "failed: rank[1] lost");
}

// A port nothing listens on now.
uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(RunMetricsLive, AScrapeOfARunningRunParsesAndItsCountersMove) {
  const uint16_t port = free_port();
  cli_result run;
  std::thread runner([&] {
    run = run_cli({"run", "--device", "cpu", "--no-progress", "--requests", "120", "--arrival-rate",
                   "60", "--metrics-port", std::to_string(port)});
  });
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(0, 200000);
  // Scrape until generated tokens appear, then until they grow: the counters move while it runs.
  double first = -1, later = -1;
  int healthy = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && later <= first) {
    if (auto res = client.Get("/metrics"); res && res->status == 200) {
      const auto s = parse_exposition(res->body);
      const double tokens = s.at("kvactor:generation_tokens_total");
      if (first <= 0)
        first = tokens;
      else
        later = tokens;
      if (tokens > 0) {
        EXPECT_EQ(s.at("kvactor:ranks_ready"), 1);
        EXPECT_GT(s.at("kvactor:rank_kv_cache_blocks{rank=\"0\"}"), 0);
        EXPECT_GT(s.count("kvactor:rank_startup_phase_seconds{rank=\"0\",phase=\"weights\"}"), 0u);
      }
      if (auto h = client.Get("/health"); h && h->status == 200 && h->body == "ready\n") ++healthy;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // the next scrape, not a wait
  }
  runner.join();
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_GT(first, 0) << "no scrape saw a generated token";
  EXPECT_GT(later, first) << "the counter did not move between scrapes";
  EXPECT_GT(healthy, 0) << "/health never answered ready during the run";
}

TEST(RunMetricsLive, APortThatCannotBeListenedOnIsAnErrorNamingTheFlag) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  auto r = run_cli({"run", "--no-progress", "--requests", "2", "--metrics-port",
                    std::to_string(ntohs(a.sin_port))});
  close(fd);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--metrics-port: cannot listen on 127.0.0.1:"), std::string::npos) << r.err;
}

} // namespace
} // namespace kvactor::test
