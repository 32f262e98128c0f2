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
#include "messages/limits.hpp"
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

// A driver of another process may send any rank_config: a node's rank refuses one it cannot
// serve by naming the field (a block of 0 tokens used to divide by zero and kill the node), and
// the node serves the next driver.
TEST_F(NodeRelay, ABadRankConfigIsRefusedByNameAndTheNodeServesTheNextDriver) {
  auto n = make_node(1);
  auto r = spawn_rank_on(n, 0, 1, 0);
  auto bad = tiny_rank_config();
  bad.block_size = 0;
  driver_setup setup;
  setup.ranks = {r};
  setup.configs = {bad};
  setup.bootstrap_communicator = true;
  setup.routes = {node_route{n, {0}, {0}}};
  auto drv = spawn(driver, std::move(setup));
  auto ready = request_within<std::vector<rank_ready>>(drv, atom::start_v);
  ASSERT_FALSE(ready);
  EXPECT_NE(message_of(ready.error()).find("rank_config.block_size: 0 is outside [1, 8192]"),
            std::string::npos)
      << message_of(ready.error());
  caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
  auto released = request_within<int32_t>(n, atom::release_v);
  ASSERT_TRUE(released) << message_of(released.error());
  const auto next = serve(true);
  EXPECT_EQ(next.finished, 6);
  EXPECT_EQ(next.failed, 0);
}

TEST(RankConfigCheck, NamesEveryFieldOutsideItsRange) {
  struct bad_value {
    void (*set)(rank_config&);
    const char* message;
  };
  const bad_value cases[] = {
      {[](rank_config& c) { c.block_size = -16; }, "rank_config.block_size: -16 is outside"},
      {[](rank_config& c) { c.max_num_seqs = 0; }, "rank_config.max_num_seqs: 0 is outside"},
      {[](rank_config& c) { c.max_num_batched_tokens = 2147483647; },
       "rank_config.max_num_batched_tokens: 2147483647 is outside"},
      {[](rank_config& c) { c.max_model_len = -1; }, "rank_config.max_model_len: -1 is outside"},
      {[](rank_config& c) { c.num_gpu_blocks_override = -1; },
       "rank_config.num_gpu_blocks_override: -1 is outside"},
      {[](rank_config& c) { c.num_ubatches = 3; }, "rank_config.num_ubatches: 3 is outside"},
      {[](rank_config& c) { c.tensor_parallel_size = 0; },
       "rank_config.tensor_parallel_size: 0 is outside"},
      {[](rank_config& c) { c.rank = 1; }, "rank_config.rank: 1 is outside [0, 1)"},
      {[](rank_config& c) { c.kv_cache_memory = -1; }, "rank_config.kv_cache_memory: -1 bytes"},
      {[](rank_config& c) { c.cudagraph_capture_sizes = {0}; },
       "rank_config.cudagraph_capture_sizes: 0 is outside"},
      {[](rank_config& c) { c.device = static_cast<device_kind>(9); },
       "rank_config.device: 9 is not a device"},
      {[](rank_config& c) { c.model.clear(); }, "rank_config.model: empty"}};
  EXPECT_TRUE(check_rank_config(tiny_rank_config()));
  for (const auto& c : cases) {
    auto config = tiny_rank_config();
    c.set(config);
    auto checked = check_rank_config(config);
    ASSERT_FALSE(checked) << c.message;
    EXPECT_NE(checked.err().message.find(c.message), std::string::npos) << checked.err().message;
  }
}

} // namespace
} // namespace kvactor::test
