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
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/kv_cache/allocation.hpp"
#include "actors/metadata/actor.hpp"
#include "actors/rank/executor.hpp"
#include "actors/rank/step_state.hpp"
#include "actors/trace_recorder.hpp"
#include "kvactor/kernels/attention_stack.h"
#include "kvactor/kernels/communicator.h"
#include "kvactor/kernels/socket_communicator.h"

namespace kvactor {

struct rank_state {
  rank_config config;
  model_layout model;
  registry_actor registry;
  kv_cache_actor kv;
  cudagraph_actor graphs;
  std::vector<builder_actor> builders;
  std::shared_ptr<kv_cache_allocator> allocator;
  backend_assignment backends;
  std::vector<kv_cache_group> groups;   // as bound: planned groups first
  std::vector<group_geometry> geometry; // planned (memory-owning) groups
  step_state steps;
  std::shared_ptr<step_batch> batch;
  std::vector<std::shared_ptr<ubatch_output>> outputs; // [num_ubatches]
  std::shared_ptr<std::vector<std::byte>> workspace;
  std::unique_ptr<step_executor> executor; // the attention stack on this rank's device
  int32_t hidden_size = 0;
  std::vector<int32_t> layer_group; // [stack layers] KV cache group of each layer
  std::vector<phase_timing> phases;
  std::shared_ptr<kernels::communicator> comm; // this rank's end of its TP group (world 1 alone)
  int64_t planned_blocks = 0;                  // this rank's own plan, before the minimum
  bool nccl = false;                           // joins an NCCL communicator before configure
  std::string socket_host; // non-empty: joins a socket communicator (rank 0 listens here)
  std::unique_ptr<kernels::socket_listener> listener; // rank 0 of a socket group, until join
  int32_t device_index = -1; // the GPU of a CUDA rank; -1: the rank's number
  std::function<void(std::shared_ptr<kernels::communicator>)> on_join; // may be empty
  std::chrono::milliseconds collective_timeout{120'000};
  uint64_t stall_before_collective = 0;     // fault injection (--debug-stall); 0: never
  std::shared_ptr<trace_recorder> recorder; // null: no --record
  bool ready = false;
  bool graphs_enabled = false; // false: every step eager, no dispatch needed
  bool lazy_capture = false;   // capture between steps (--cudagraph-capture lazy)
  bool capturing = false;      // a lazy capture is under way
  size_t graphs_planned = 0, graphs_tried = 0, graphs_failed = 0;
  int64_t graph_bytes = 0; // device bytes of the captured graphs, as the graph manager counts
  bool busy = false;       // a step is in flight; steps never overlap
  bool metadata_digest = false;
  // Actor names in traces, built once (not per step): "rank[r]", "builder[u]@rank[r]".
  std::string trace_name;
  std::string graphs_trace_name; // "cudagraph@rank[r]"
  std::vector<std::string> builder_trace_names;
  int64_t device_free_at_start = 0; // cudaMemGetInfo before configure (GPU ranks)
  static inline const char* name = "kvactor.rank";
  rank_state() = default;
};

/// A rank alone (tensor_parallel_size 1): its communicator is a host group of one.
rank_actor::behavior_type rank(rank_actor::stateful_pointer<rank_state> self);

/// What a rank shares with its process. A rank whose communicator spans several ranks blocks in
/// its collectives: spawn it detached (its own thread); spawn_rank_group (group.hpp) does.
struct rank_runtime {
  /// This rank's end of an in-process host group; null: a host group of one, or, with `nccl`,
  /// the NCCL communicator it joins.
  std::shared_ptr<kernels::communicator> comm;
  std::shared_ptr<trace_recorder> recorder; // null: no --record
  bool metadata_digest = false;             // builders digest their metadata (always recording)
  int64_t device_free_at_start = 0;         // cudaMemGetInfo before configure (GPU ranks)
  bool nccl = false; // GPU ranks: the driver bootstraps an NCCL communicator (unique_id, join)
  /// CPU ranks of a cluster (one process per node): the driver bootstraps a socket communicator
  /// the same way; rank 0 listens on this host. Empty: not a socket rank.
  std::string socket_host;
  /// The GPU of a CUDA rank (cluster nodes: the slot); -1: the GPU numbered like the rank.
  int32_t device_index = -1;
  /// Called on the rank's thread once it has joined its communicator (cluster nodes keep it to
  /// abort a rank stuck in a collective whose peer's link was cut).
  std::function<void(std::shared_ptr<kernels::communicator>)> on_join;
  std::chrono::milliseconds collective_timeout{120'000}; // NCCL init and collective waits
  uint64_t stall_before_collective = 0; // fault injection for NCCL ranks (--debug-stall)
};

rank_actor::behavior_type rank_with(rank_actor::stateful_pointer<rank_state> self,
                                    rank_runtime runtime);

} // namespace kvactor
