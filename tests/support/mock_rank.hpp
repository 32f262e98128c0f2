// A mock rank_actor for driving the driver in isolation. Every handler is scripted by the test; a
// message whose handler the script leaves empty (or any message outside rank_actor's interface)
// fails the test and is answered with an error, so an unexpected turn of the protocol is loud.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>

#include "actors/interfaces.hpp"

namespace kvactor::test {

/// What the mock does with one step_plan.
struct step_outcome {
  enum class kind { reply, reject, die, ignore };
  kind what = kind::reply;
  step_done done;  // kind::reply
  caf::error err;  // kind::reject
  caf::error exit; // kind::die: the mock quits with this reason and never replies

  static step_outcome reply(step_done d) { return {kind::reply, std::move(d), {}, {}}; }
  static step_outcome reject(caf::error e) { return {kind::reject, {}, std::move(e), {}}; }
  static step_outcome die(caf::error reason) { return {kind::die, {}, {}, std::move(reason)}; }
  /// Never answered (as a step lost on its way): the request stays open.
  static step_outcome ignore() { return {kind::ignore, {}, {}, {}}; }
};

/// The mock's answers. Empty = unexpected: the test fails when that message arrives.
struct mock_rank_script {
  std::function<rank_plan(const rank_config&)> on_configure;
  caf::error die_on_configure; // set: quit with this reason instead of answering configure
  std::function<rank_ready(int64_t num_blocks)> on_allocate;
  std::function<step_outcome(const step_plan&)> on_step;
  std::function<std::vector<collective_entry>()> on_collectives;
};

/// Everything the mock received, in order (read it while the mock is idle).
struct mock_rank_log {
  std::vector<rank_config> configures;
  std::vector<int64_t> allocates;
  std::vector<step_plan> steps;
  int64_t collectives = 0; // ledger requests answered
  int64_t unexpected = 0;
};

struct mock_rank_handle {
  rank_actor actor;
  std::shared_ptr<mock_rank_log> log;
};

mock_rank_handle spawn_mock_rank(caf::actor_system& sys, mock_rank_script script);

// ---- canned answers --------------------------------------------------------------------------

/// The one KV cache group mock ranks report: full attention, 16-token blocks.
kv_cache_group mock_group();

/// A rank_plan for rank `rank` with `num_blocks` planned blocks of mock_group().
rank_plan mock_plan(int32_t rank, int64_t num_blocks);

/// The token a mock rank "samples" for a request at a step: a pure function of both, so that
/// replicas agree and outputs are predictable.
int32_t mock_token(uint64_t request_id, uint64_t seq);

/// step_done for `plan`: one mock_token per scheduled request with sample = true.
step_done mock_done(const step_plan& plan, int32_t rank);

/// configure -> mock_plan(rank, planned_blocks); allocate(n) -> ready with n blocks;
/// every step -> mock_done. Override the members to script a scenario.
mock_rank_script canned_rank(int32_t rank, int64_t planned_blocks);

} // namespace kvactor::test
