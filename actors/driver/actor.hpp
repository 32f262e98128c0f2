// The driver actor: configures every rank, agrees on one block count, then runs the
// continuous-batching loop: schedule -> step_plan to every rank -> gather step_done -> apply.
// How a step reaches the ranks and comes back is its rank fabric's business (fabric/): the
// driver keeps the scheduler, the replies of the step in flight and its phase.
//
//   start ─► [NCCL: unique_id(rank 0) ─► join(id, i) every rank] ─►
//            configure(rank i) ... ─► min(planned blocks) ─► allocate(rank i) ... ─► ready
//   run ───► [admit arrivals] ─► schedule(seq) ─► step_plan ─► all ranks ─► step_done ─► apply ─┐
//              ▲                                                                                │
//              └────────────────────────────── step (to itself) ◄──────────────────────────────┘
// A rank that rejects a step names the requests at fault: those fail (reported, never dropped)
// and the step is re-sent without them under the same sequence number. A rank that does not
// answer within the step timeout ends the run, named (step_deadlines.hpp); under --chaos the
// links lose, repeat and delay messages and the fabric re-sends what was not answered. A rank whose
// collective failed (errc::collective_failed) ends the run: the driver gathers every rank's
// collective ledger (at most the collective timeout), fails the step's requests with the diagnosis
// of which rank diverged and where, fails every other unfinished request, and reports the run's
// error.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "actors/chaos/chaos_link.hpp"
#include "actors/driver/arrival_queue.hpp"
#include "actors/driver/fabric/actor_host.hpp"
#include "actors/driver/fabric/node_fabric.hpp"
#include "actors/driver/run_stats.hpp"
#include "actors/driver/scheduler.hpp"
#include "actors/driver/step_deadlines.hpp"
#include "actors/interfaces.hpp"
#include "actors/trace_recorder.hpp"

namespace kvactor {

struct driver_setup {
  std::vector<rank_actor> ranks;
  std::vector<rank_config> configs; // [ranks]; max_model_len resolved
  uint64_t epoch = 1;
  std::function<void(const run_progress&)> on_progress; // may be empty
  std::shared_ptr<trace_recorder> recorder;             // null: no --record
  bool bootstrap_communicator = false; // NCCL ranks: rank 0 creates the id, every rank joins
  std::chrono::milliseconds collective_timeout{120'000}; // how long a ledger request may take
  /// Where each rank runs, for messages ("node 10.0.0.2:7400"); empty: this process.
  std::vector<std::string> rank_locations = {};
  /// Each applied step's sampled tokens, as they arrive (may be empty): what streams output.
  std::function<void(const std::vector<sampled_token>&)> on_tokens = {};
  /// Serving: every request's tokens and end go here as they happen (null: nowhere).
  output_sink_actor outputs = {};
  /// Serving: the run goes on while idle and ends only when drained; a request's state is
  /// dropped once its end was reported, so that memory does not grow with the requests served.
  bool keep_serving = false;
  /// How long a rank may take to answer a step, and whether unanswered steps are re-sent.
  step_deadlines deadlines = {};
  /// Testing: disturb every message between the driver and its ranks (kvactor run --chaos).
  std::optional<chaos_spec> chaos = std::nullopt;
  /// Cluster mode: every rank's node. A step then goes once to each node, which relays it to its
  /// ranks and answers for all of them (node_step); empty, or under --chaos (whose links disturb
  /// each rank's messages), a step goes to every rank itself.
  std::vector<node_route> routes = {};
  /// Cluster mode: a path for node steps beside the middleman, by route (null: none). A route
  /// whose channel is not open takes the middleman.
  std::shared_ptr<node_step_channel> channel = nullptr;
};

struct step_flight; // the step in flight: its delivery and the ranks' replies (actor.cpp)

/// Where a driver is in its one run.
enum class driver_phase : uint8_t {
  created,  // start not asked yet, or it failed
  starting, // configuring and allocating the ranks (start's answer owed)
  ready,    // started: run may begin
  idle,     // running, no step in flight (waiting for an arrival)
  stepping, // running, a step in flight
  finished, // the run ended: a driver serves one run
};

/// The answers the driver owes.
struct driver_promises {
  caf::typed_response_promise<std::vector<rank_ready>> start;
  caf::typed_response_promise<run_summary> run;
  // request_await promises by request id, delivered once the request is done
  std::multimap<uint64_t, caf::typed_response_promise<request_result>> awaits;
};

using driver_host = actor_host<driver_actor::base>;

struct driver_state {
  driver_setup setup;
  driver_phase phase = driver_phase::created;
  std::unique_ptr<scheduler> sched;    // from start on
  std::unique_ptr<driver_host> host;   // requests and timers for the fabric
  std::unique_ptr<rank_fabric> fabric; // how steps reach the ranks
  std::shared_ptr<step_flight> flight; // the step in flight, if one is
  arrival_queue arrivals;
  run_stats stats{false};
  uint64_t seq = 0; // the next step's
  run_end end;      // why the run stopped early, if it did
  driver_promises owed;
  static inline const char* name = "kvactor.driver";
  driver_state() = default;
};

driver_actor::behavior_type driver(driver_actor::stateful_pointer<driver_state> self,
                                   driver_setup setup);

} // namespace kvactor
