// The rank actor: composes registry, kv_cache, builder[u] and cudagraph; executes steps.
//
//   [NCCL ranks: unique_id (rank 0) ─► communicator_id; join(id, rank) ─► NCCL communicator]
//   configure ──► load model ─► weights ─► kv_cache.plan ─► registry.assign ──► rank_plan
//   allocate(n) ─► agree(min planned blocks) == n ─► kv_cache.allocate ─► bind views ─►
//   spawn builders ─► cudagraph.plan ─► [capture: cudagraph.capture ─► executor ─►
//   cudagraph_captured, until none is left] ─► rank_ready
//   (lazy capture: one cudagraph.capture round after each step instead)
//   step_plan ──► validate ─► apply ─► builder[u] (concurrently) + cudagraph.dispatch
//                          ─► forward per ubatch (all-reduce per layer) ─► sample ──► step_done
//   collectives ──► this rank's collective ledger
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/chaos/chaos_link.hpp"
#include "actors/interfaces.hpp"
#include "actors/kv_cache/allocation.hpp"
#include "actors/metadata/actor.hpp"
#include "actors/rank/executor.hpp"
#include "actors/rank/executor_registry.hpp"
#include "actors/rank/group.hpp"
#include "actors/rank/step_answers.hpp"
#include "actors/rank/step_state.hpp"
#include "actors/trace_recorder.hpp"
#include "kvactor/comm/communicator.h"
#include "kvactor/comm/socket_communicator.h"
#include "kvactor/kernels/layer_batch.h"

namespace kvactor {

/// What a rank shares with its process. A rank whose communicator spans several ranks blocks in
/// its collectives: spawn it detached (its own thread); spawn_rank_group (group.hpp) does.
/// Testing only: the faults injected into one rank. A rank in production carries none.
struct rank_faults {
  uint64_t stall_before_collective = 0; // NCCL ranks: this collective stalls (--debug-stall)
  uint64_t fail_capture = 0;            // this rank's graph capture number N fails
  std::vector<step_fault> step_faults;  // --chaos-kill / --chaos-stall aimed at this rank
  std::optional<chaos_spec> chaos;      // --chaos: delay messages to the builders and graphs

  bool any() const {
    return stall_before_collective != 0 || fail_capture != 0 || !step_faults.empty() || chaos;
  }
};

struct rank_runtime {
  /// This rank's end of an in-process host group; null: a host group of one, or, with `nccl`,
  /// the NCCL communicator it joins.
  std::shared_ptr<comm::communicator> comm;
  std::shared_ptr<trace_recorder> recorder; // null: no --record
  bool metadata_digest = false;             // builders digest their metadata (always recording)
  bool nccl = false; // GPU ranks: the driver bootstraps an NCCL communicator (unique_id, join)
  /// CPU ranks of a cluster (one process per node): the driver bootstraps a socket communicator
  /// the same way; rank 0 listens on this host. Empty: not a socket rank.
  std::string socket_host;
  /// The GPU of a CUDA rank (cluster nodes: the slot); -1: the GPU numbered like the rank.
  int32_t device_index = -1;
  /// Called on the rank's thread once it has joined its communicator (cluster nodes keep it to
  /// abort a rank stuck in a collective whose peer's link was cut).
  std::function<void(std::shared_ptr<comm::communicator>)> on_join;
  std::chrono::milliseconds collective_timeout{120'000}; // NCCL init and collective waits
  /// Testing: the faults injected into this rank; null (none) unless a test flag asked.
  std::shared_ptr<const rank_faults> faults;
  /// The executors the rank chooses from (rank_config::executor); null: the built-in ones.
  std::shared_ptr<const executor_registry> executors;

  /// The injected faults, or none.
  const rank_faults& injected() const {
    static const rank_faults none;
    return faults ? *faults : none;
  }
};

/// The rank's children: one actor per concern it composes.
struct rank_children {
  registry_actor registry;
  kv_cache_actor kv;
  cudagraph_actor graphs;
  std::vector<builder_actor> builders; // [num_ubatches]
};

/// The KV cache as this rank planned, allocated and bound it.
struct rank_kv {
  std::shared_ptr<kv_cache_allocator> allocator;
  backend_assignment backends;
  std::vector<kv_cache_group> groups;   // as bound: planned groups first
  std::vector<group_geometry> geometry; // planned (memory-owning) groups
  std::vector<int32_t> layer_group;     // [stack layers] KV cache group of each layer
  int64_t planned_blocks = 0;           // this rank's own plan, before the minimum
};

/// Steps: the requests the rank holds, the current batch and the builders' outputs.
struct rank_steps {
  step_state requests;
  step_answers answers; // a step seen again gets its first answer
  std::vector<caf::typed_response_promise<step_done>> copies; // copies of the step in flight
  bool stalled = false; // --chaos-stall / --chaos-kill: answers no step again
  std::vector<caf::typed_response_promise<step_done>> unanswered; // held, never delivered
  std::shared_ptr<step_batch> batch;
  std::vector<std::shared_ptr<ubatch_output>> outputs; // [num_ubatches]
  bool busy = false;                                   // a step is in flight; steps never overlap
};

/// CUDA graphs: whether steps may replay them, and how capture went.
struct rank_graphs {
  bool enabled = false;   // false: every step eager, no dispatch needed
  bool lazy = false;      // capture between steps (--cudagraph-capture lazy)
  bool capturing = false; // a lazy capture is under way
  size_t planned = 0, tried = 0, failed = 0;
  int64_t bytes = 0; // device bytes of the captured graphs, as the graph manager counts
};

/// Actor names in traces, built once (not per step).
struct rank_trace_names {
  std::string self;                  // "rank[r]"
  std::string graphs;                // "cudagraph@rank[r]"
  std::vector<std::string> builders; // "builder[u]@rank[r]"
};

struct rank_state {
  rank_runtime runtime;                     // as the process spawned it
  caf::actor_addr driver;                   // who configured it; the rank stops when it goes
  std::shared_ptr<comm::communicator> comm; // this rank's end of its TP group (world 1 alone)
  std::unique_ptr<comm::socket_listener> listener; // rank 0 of a socket group, until join
  rank_config config;
  model_layout model;
  std::unique_ptr<step_executor> executor; // chosen from the executor registry
  rank_children children;
  rank_kv kv;
  rank_steps steps;
  rank_graphs graphs;
  rank_trace_names names;
  std::vector<phase_timing> phases;
  int64_t device_free_at_start = 0; // cudaMemGetInfo before configure (GPU ranks)
  bool ready = false;
  static inline const char* name = "kvactor.rank";
  rank_state() = default;
};

/// A rank alone (tensor_parallel_size 1): its communicator is a host group of one.
rank_actor::behavior_type rank(rank_actor::stateful_pointer<rank_state> self);

rank_actor::behavior_type rank_with(rank_actor::stateful_pointer<rank_state> self,
                                    rank_runtime runtime);

} // namespace kvactor
