// The fan-out profile's marks (actors/step_timeline.hpp): what a process appends to its file, and
// that a step relayed through a node passes the driver's and the rank's points in order.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/node/actor.hpp"
#include "actors/step_timeline.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/node_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class StepTimeline : public node_system_fixture {
protected:
  ~StepTimeline() override { step_timeline::disable(); }

  std::string path() const { return dir_.file("marks.csv"); }

  std::vector<std::string> lines() const {
    std::ifstream in(path());
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
      out.push_back(line);
    return out;
  }

  // One request set served by a driver whose steps go through a node to its one rank.
  void serve_through_a_node() {
    auto n = make_node(1);
    auto r = spawn_rank_on(n, 0, 1, 0);
    driver_setup setup;
    setup.ranks = {r};
    setup.configs = {tiny_rank_config()};
    setup.bootstrap_communicator = true;
    setup.routes = {node_route{n, {0}, {0}}};
    auto drv = spawn(driver, std::move(setup));
    auto ready = request_within<std::vector<rank_ready>>(drv, atom::start_v);
    ASSERT_TRUE(ready) << message_of(ready.error());
    auto queued = request_within<int64_t>(drv, atom::submit_v, tiny_six_requests());
    ASSERT_TRUE(queued) << message_of(queued.error());
    auto summary = request_within<run_summary>(drv, atom::run_v);
    ASSERT_TRUE(summary) << message_of(summary.error());
    EXPECT_EQ(summary->finished, 6);
  }

private:
  temp_dir dir_{"step-timeline"};
};

TEST_F(StepTimeline, AppendsEachMarkAsACsvLineUnderTheProcessLabelAndForgetsWhatItWrote) {
  step_timeline::enable("test", path());
  step_timeline::note("route 0 port 9");
  step_timeline::mark(7, 2, step_point::rank_received);
  ASSERT_TRUE(static_cast<bool>(step_timeline::flush()));
  ASSERT_TRUE(static_cast<bool>(step_timeline::flush())); // nothing new to append
  const auto got = lines();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "# test route 0 port 9");
  EXPECT_THAT(got[1], StartsWith("test,7,2,rank_received,"));
}

TEST_F(StepTimeline, KeepsNoMarkWhileOff) {
  step_timeline::enable("test", path());
  step_timeline::disable();
  EXPECT_FALSE(step_timeline::enabled());
  step_timeline::mark(1, -1, step_point::driver_plan);
  ASSERT_TRUE(static_cast<bool>(step_timeline::flush()));
  EXPECT_TRUE(lines().empty());
}

TEST_F(StepTimeline, AFileThatCannotBeWrittenIsAnErrorNamingIt) {
  const std::string bad = path() + "/not-a-directory/marks.csv";
  step_timeline::enable("test", bad);
  step_timeline::mark(1, -1, step_point::driver_plan);
  const auto written = step_timeline::flush();
  ASSERT_FALSE(written);
  EXPECT_THAT(written.err().message, HasSubstr("cannot append to " + bad));
}

TEST_F(StepTimeline, EveryStepThroughANodePassesTheDriverAndTheRankInOrder) {
  step_timeline::enable("driver", path());
  serve_through_a_node();
  ASSERT_TRUE(static_cast<bool>(step_timeline::flush()));
  std::map<uint64_t, std::map<std::string, int64_t>> steps; // seq -> point -> first ns
  for (const auto& line : lines()) {
    std::stringstream in(line);
    std::string label, seq, where, point, ns;
    std::getline(in, label, ',');
    std::getline(in, seq, ',');
    std::getline(in, where, ',');
    std::getline(in, point, ',');
    std::getline(in, ns, ',');
    EXPECT_EQ(label, "driver");
    steps[std::stoull(seq)].emplace(point, std::stoll(ns));
  }
  int counted = 0;
  for (const auto& [seq, at] : steps) {
    if (!at.count("driver_step_done")) continue;
    ++counted;
    ASSERT_TRUE(at.count("driver_plan") && at.count("rank_received") && at.count("rank_answered"))
        << "step " << seq;
    EXPECT_LE(at.at("driver_plan"), at.at("rank_received")) << "step " << seq;
    EXPECT_LE(at.at("rank_received"), at.at("rank_answered")) << "step " << seq;
    EXPECT_LE(at.at("rank_answered"), at.at("driver_step_done")) << "step " << seq;
  }
  EXPECT_GT(counted, 0);
}

} // namespace
} // namespace kvactor::test
