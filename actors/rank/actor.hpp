// The rank actor: composes registry, kv_cache, builder[u] and cudagraph; executes steps.
//
//   configure ──► load model ─► weights ─► kv_cache.plan ─► registry.assign ──► rank_plan
//   allocate(n) ─► kv_cache.allocate ─► bind views ─► spawn builders ─► cudagraph.plan ─►
//   rank_ready step_plan ──► validate ─► apply ─► builder[u] (concurrently) + cudagraph.dispatch
//                                    ─► forward per ubatch ─► sample ──► step_done
#pragma once

#include <memory>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/kv_cache/allocation.hpp"
#include "actors/metadata/actor.hpp"
#include "actors/rank/executor.hpp"
#include "actors/rank/step_state.hpp"
#include "actors/trace_recorder.hpp"
#include "kvactor/kernels/attention_stack.h"
#include "kvactor/kernels/host_communicator.h"

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
  std::shared_ptr<kernels::host_communicator> comm; // tensor parallel on the CPU; null for 1 rank
  std::shared_ptr<trace_recorder> recorder;         // null: no --record
  bool ready = false;
  bool graphs_captured = false; // false: every step eager, no dispatch needed
  bool busy = false;            // a step is in flight; steps never overlap
  bool metadata_digest = false;
  int64_t device_free_at_start = 0; // cudaMemGetInfo before configure (GPU ranks)
  static inline const char* name = "kvactor.rank";
  rank_state() = default;
};

rank_actor::behavior_type rank(rank_actor::stateful_pointer<rank_state> self);

/// A rank whose output projections all-reduce through `comm` with its tensor-parallel peers.
/// Each such rank blocks in the all-reduce, so spawn it detached (its own thread).
rank_actor::behavior_type rank_tp(rank_actor::stateful_pointer<rank_state> self,
                                  std::shared_ptr<kernels::host_communicator> comm);

/// What a rank shares with its process: the TP communicator and the trace recorder (both may
/// be null).
struct rank_runtime {
  std::shared_ptr<kernels::host_communicator> comm;
  std::shared_ptr<trace_recorder> recorder;
  bool metadata_digest = false;
  int64_t device_free_at_start = 0; // cudaMemGetInfo before configure (GPU ranks) // builders
                                    // digest their metadata (always when recording)
};

rank_actor::behavior_type rank_with(rank_actor::stateful_pointer<rank_state> self,
                                    rank_runtime runtime);

} // namespace kvactor
