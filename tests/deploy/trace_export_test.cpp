// `kvactor trace export --format chrome`: a recorded run as trace-event JSON that Perfetto and
// chrome://tracing open, checked against the format's rules.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "cli_support.hpp"

namespace kvactor::test {
namespace {

// The trace-event format's rules for the phases kvactor writes (X, s, f, M); adds a failure for
// each event that breaks one.
void expect_trace_event_format(const nlohmann::json& j) {
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("traceEvents") && j["traceEvents"].is_array());
  EXPECT_EQ(j.value("displayTimeUnit", ""), "ms");
  std::set<int> named, used;
  std::map<uint64_t, int> flows; // id -> starts minus ends
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e["ph"].is_string()) << e;
    ASSERT_TRUE(e["pid"].is_number_integer() && e["tid"].is_number_integer()) << e;
    ASSERT_TRUE(e["name"].is_string()) << e;
    const std::string ph = e["ph"];
    const int tid = e["tid"];
    if (ph == "M") {
      EXPECT_EQ(e["name"], "thread_name") << e;
      EXPECT_TRUE(e["args"]["name"].is_string()) << e;
      named.insert(tid);
      continue;
    }
    ASSERT_TRUE(e["ts"].is_number() && e["ts"].get<double>() >= 0) << e;
    used.insert(tid);
    if (ph == "X") {
      EXPECT_TRUE(e["dur"].is_number() && e["dur"].get<double>() > 0) << e;
    } else if (ph == "s" || ph == "f") {
      ASSERT_TRUE(e["id"].is_number_unsigned()) << e;
      flows[e["id"].get<uint64_t>()] += ph == "s" ? 1 : -1;
      if (ph == "f") EXPECT_EQ(e.value("bp", ""), "e") << e;
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  for (int tid : used)
    EXPECT_TRUE(named.count(tid)) << "track " << tid << " has no thread_name";
  for (const auto& [id, balance] : flows)
    EXPECT_EQ(balance, 0) << "flow " << id << " does not start once and end once";
}

TEST(TraceExport, ARecordedRunExportsAsValidChromeTraceEventsWithAStepSpanPerStep) {
  const auto trace = ::testing::TempDir() + "export.kvtrace";
  const auto summary = ::testing::TempDir() + "export_summary.json";
  auto run = run_cli({"run", "--no-progress", "--requests", "6", "--ubatches", "2", "--record",
                      trace, "--summary-json", summary});
  ASSERT_EQ(run.code, 0) << run.err;
  auto exported = run_cli({"trace", "export", trace, "--format", "chrome"});
  ASSERT_EQ(exported.code, 0) << exported.err;
  const auto j = exported.json();
  expect_trace_event_format(j);
  std::set<std::string> tracks;
  int steps = 0, messages = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") tracks.insert(e["args"]["name"].get<std::string>());
    if (e.value("cat", "") == "step") ++steps;
    if (e["ph"] == "s") ++messages;
  }
  for (const char* actor : {"steps", "driver", "rank[0]", "builder[0]@rank[0]",
                            "builder[1]@rank[0]", "cudagraph@rank[0]"})
    EXPECT_TRUE(tracks.count(actor)) << actor;
  // A span per step plan the driver sent (the summary's steps, and a last plan that only carries
  // finished requests when there is one).
  auto shown = run_cli({"trace", "show", trace, "--json"});
  int plans = 0;
  for (const auto& r : shown.json())
    plans += r["type"] == "kvactor::step_plan" && r["receiver"] == "rank[0]" ? 1 : 0;
  EXPECT_EQ(steps, plans);
  std::ifstream in(summary);
  EXPECT_GE(steps, nlohmann::json::parse(in)["steps"].get<int>());
  EXPECT_EQ(messages, static_cast<int>(shown.json().size())) << "one flow per recorded message";
  // --out writes the same document to a file.
  const auto file = ::testing::TempDir() + "export.json";
  ASSERT_EQ(run_cli({"trace", "export", trace, "--out", file}).code, 0);
  std::ifstream written(file);
  EXPECT_EQ(nlohmann::json::parse(written), j);
}

TEST(TraceExport, AnUnknownFormatOrAMissingFileIsExitTwoNamingIt) {
  auto format = run_cli({"trace", "export", "x.kvtrace", "--format", "otf2"});
  EXPECT_EQ(format.code, 2);
  EXPECT_NE(format.err.find("--format: unknown value 'otf2' (expected chrome)"), std::string::npos)
      << format.err;
  auto missing = run_cli({"trace", "export", ::testing::TempDir() + "none.kvtrace"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
}

} // namespace
} // namespace kvactor::test
