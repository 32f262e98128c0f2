// The driver actor: configures every rank, agrees on one block count, then runs the
// continuous-batching loop: schedule -> step_plan to every rank -> gather step_done -> apply.
//
//   start ─► [NCCL: unique_id(rank 0) ─► join(id, i) every rank] ─►
//            configure(rank i) ... ─► min(planned blocks) ─► allocate(rank i) ... ─► ready
//   run ───► [admit arrivals] ─► schedule(seq) ─► step_plan ─► all ranks ─► step_done ─► apply ─┐
//              ▲                                                                                │
//              └────────────────────────────── step (to itself) ◄──────────────────────────────┘
// A rank that rejects a step names the requests at fault: those fail (reported, never dropped)
// and the step is re-sent without them under the same sequence number. A rank that does not
// answer within the step timeout ends the run, named (step_deadlines.hpp); under --chaos the
// links lose, repeat and delay messages and the driver re-sends what was not answered. A rank whose
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
#include "actors/driver/collective_diagnosis.hpp"
#include "actors/driver/latency.hpp"
#include "actors/driver/node_channel.hpp"
#include "actors/driver/scheduler.hpp"
#include "actors/driver/step_deadlines.hpp"
#include "actors/interfaces.hpp"
#include "actors/trace_recorder.hpp"

namespace kvactor {

/// Progress of a run, as the driver reports it after every step.
struct run_progress {
  int64_t steps = 0;
  int64_t finished = 0;
  int64_t failed = 0;
  int64_t total = 0;
  int64_t generated_tokens = 0;
  int64_t prompt_tokens = 0; // prompts of the requests whose prefill ended (a first token)
  int32_t running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0; // the null block not counted
  int64_t preemptions = 0;
  int64_t graph_replays = 0, eager_steps = 0;
  // Ranks whose last collective timed out, or failed otherwise (count_collective_outcomes).
  int64_t collective_timeouts = 0, collective_failures = 0;
  int64_t prefix_hit_tokens = 0; // prompt tokens admissions took from the prefix cache
  link_counts chaos;             // --chaos: what the links did, both directions of every link
  int64_t steps_resent = 0;      // copies of a step re-sent to a rank that had not answered
  double elapsed_s = 0.0;
  // Since the previous report: the steps' durations, each first token's TTFT, and the TPOT
  // (requests of two tokens or more) and end-to-end latency of each request that finished.
  std::vector<double> step_s, ttft_s, tpot_s, e2e_s;
};

/// Cluster mode: one node and the ranks it hosts for this run.
struct node_route {
  node_actor node;
  std::vector<int32_t> ranks; // rank indices
  std::vector<int32_t> slots; // [ranks]: the node's slot of each
};

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

struct step_flight; // the step in flight: its plan and replies (actor.cpp)

struct driver_state {
  driver_setup setup;
  std::unique_ptr<scheduler> sched;
  std::vector<kv_cache_group> groups;
  int64_t num_blocks = 0;
  std::vector<request_spec> pending; // sorted by arrival
  size_t next_arrival = 0;
  int64_t prompt_tokens = 0; // counted at each request's first token
  uint64_t seq = 0;
  bool running = false;
  bool stepping = false; // a step is in flight
  caf::typed_response_promise<run_summary> done;
  caf::typed_response_promise<std::vector<rank_ready>> starting;
  bool start_pending = false;
  bool finished = false; // a driver serves one run
  std::string drain;     // why the run was told to stop (atom::drain); empty: it was not
  // request_await promises by request id, delivered once the request is done
  std::multimap<uint64_t, caf::typed_response_promise<request_result>> awaits;
  std::chrono::steady_clock::time_point started;
  std::vector<double> step_ms;
  request_latencies latencies;
  run_progress events; // latency and step events not yet reported (with on_progress only)
  int64_t steps = 0;
  int64_t graph_replays = 0;
  int64_t eager_steps = 0;
  collective_outcomes collectives;     // of the failed step that ended the run, if one did
  kvactor::error error;                // why the run stopped early (run_summary::error)
  std::shared_ptr<step_flight> flight; // the step in flight, if one is
  bool watchdog_armed = false;         // a step-timeout check is pending
  std::map<uint64_t, std::function<void()>> timers; // due on atom::timer
  uint64_t next_timer = 0;
  std::vector<chaos_link> to_rank, from_rank; // --chaos: [ranks] each direction of each link
  int64_t steps_resent = 0;
  static inline const char* name = "kvactor.driver";
  driver_state() = default;
};

driver_actor::behavior_type driver(driver_actor::stateful_pointer<driver_state> self,
                                   driver_setup setup);

/// Hex digest (FNV-1a, 64 bit) of every generated token, in request order.
std::string output_digest(const std::vector<request_result>& results);

} // namespace kvactor
