// Steps relayed through a node (cluster mode's step path, in one process): a driver that sends
// each step once to the node serves the same tokens as one that sends it to the rank itself; the
// node answers for its ranks in one message, and refuses a step it cannot relay by name.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/node/actor.hpp"
#include "messages/codec.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/node_fixture.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

class NodeRelay : public node_system_fixture {
protected:
  // start -> submit -> run; `relayed`: every step through the node.
  run_summary serve(bool relayed) {
    auto n = make_node(1);
    auto r = spawn_rank_on(n, 0, 1, 0);
    driver_setup setup;
    setup.ranks = {r};
    setup.configs = {tiny_rank_config()};
    setup.bootstrap_communicator = true; // as a cluster run: the rank joins a socket group
    if (relayed) setup.routes = {node_route{n, {0}, {0}}};
    auto drv = spawn(driver, std::move(setup));
    auto ready = request_within<std::vector<rank_ready>>(drv, atom::start_v);
    if (!ready) {
      ADD_FAILURE() << "start: " << message_of(ready.error());
      return {};
    }
    auto queued = request_within<int64_t>(drv, atom::submit_v, tiny_six_requests());
    EXPECT_TRUE(queued) << message_of(queued.error());
    auto summary = request_within<run_summary>(drv, atom::run_v);
    if (!summary) {
      ADD_FAILURE() << "run: " << message_of(summary.error());
      return {};
    }
    return std::move(*summary);
  }
};

TEST_F(NodeRelay, StepsThroughTheNodeServeTheTokensOfStepsSentToTheRank) {
  const auto direct = serve(false);
  const auto relayed = serve(true);
  EXPECT_EQ(direct.finished, 6);
  EXPECT_EQ(relayed.finished, 6);
  EXPECT_EQ(relayed.failed, 0);
  EXPECT_FALSE(relayed.output_digest.empty());
  EXPECT_EQ(relayed.output_digest, direct.output_digest);
  EXPECT_EQ(relayed.steps, direct.steps);
}

TEST_F(NodeRelay, AnswersForEveryRankInOneMessage) {
  auto n = make_node(2);
  spawn_rank_on(n, 0, 2, 0);
  spawn_rank_on(n, 1, 2, 1);
  step_plan plan;
  plan.seq = 0;
  plan.epoch = 1;
  // Ranks not yet configured refuse every step, by name: both refusals come back together.
  auto out = request_within<node_step_done>(n, node_step{encode(plan), {0, 1}, 0});
  ASSERT_TRUE(out) << message_of(out.error());
  EXPECT_TRUE(out->done.empty());
  EXPECT_TRUE(out->silent.empty());
  ASSERT_EQ(out->rejected.size(), 2u);
  std::vector<int32_t> ranks{out->rejected[0].rank, out->rejected[1].rank};
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int32_t>{0, 1}));
  for (const auto& r : out->rejected)
    EXPECT_NE(r.reason.message.find("not allocated"), std::string::npos) << r.reason.message;
}

TEST_F(NodeRelay, RefusesASlotWithoutARankNamingTheSlot) {
  auto n = make_node(2);
  spawn_rank_on(n, 0, 1, 0);
  auto out = request_within<node_step_done>(n, node_step{encode(step_plan{}), {0, 1}, 0});
  ASSERT_FALSE(out);
  EXPECT_NE(message_of(out.error()).find("slot 1 hosts no rank"), std::string::npos)
      << message_of(out.error());
}

TEST_F(NodeRelay, RefusesAPlanThatDoesNotDecodeNamingThePlan) {
  auto n = make_node(1);
  spawn_rank_on(n, 0, 1, 0);
  auto out = request_within<node_step_done>(n, node_step{{'\x93', '\x01'}, {0}, 0});
  ASSERT_FALSE(out);
  EXPECT_NE(message_of(out.error()).find("node_step: plan"), std::string::npos)
      << message_of(out.error());
}

} // namespace
} // namespace kvactor::test
