// The ranks of one tensor-parallel group, spawned as `kvactor run` and `kvactor replay` need
// them: how each rank meets its peers (a host communicator group, or an NCCL communicator the
// driver bootstraps) and on which thread it runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/chaos/chaos_link.hpp"
#include "actors/interfaces.hpp"
#include "actors/rank/executor_registry.hpp"
#include "actors/trace_recorder.hpp"
#include "kvactor/comm/communicator.h"

namespace kvactor {

/// --debug-stall RANK:N: rank RANK stops answering before its collective number N.
struct collective_stall {
  int32_t rank = 0;
  uint64_t collective = 1;
};

/// --debug-fail-capture RANK:N: rank RANK's CUDA graph capture number N fails.
struct capture_failure {
  int32_t rank = 0;
  uint64_t capture = 1;
};

/// --chaos-kill / --chaos-stall RANK:STEP: rank RANK exits, or never answers, when step STEP
/// arrives.
struct step_fault {
  enum class kind : uint8_t { kill, stall };
  kind what = kind::stall;
  int32_t rank = 0;
  uint64_t seq = 0;
};

struct rank_group_options {
  int32_t world = 1;
  bool nccl = false; // GPU ranks joined by NCCL; the driver bootstraps it (driver_setup)
  std::chrono::milliseconds collective_timeout{120'000};
  std::optional<collective_stall> stall;
  std::optional<capture_failure> fail_capture;
  std::vector<step_fault> step_faults;
  std::optional<chaos_spec> chaos;          // --chaos: each rank's links to its builders and graphs
  std::shared_ptr<trace_recorder> recorder; // null: no --record
  bool metadata_digest = false;
  /// What rank_config::executor names (a program's own executors registered beside the built-in
  /// ones); null: the built-in ones.
  std::shared_ptr<const executor_registry> executors;
  /// One communicator per rank made beforehand (e.g. a device-local group of GPU ranks sharing a
  /// GPU); empty: a host group, or NCCL. Ranks with one are detached.
  std::vector<std::shared_ptr<comm::communicator>> communicators;
  /// [world] each GPU rank's CUDA ordinal; empty: rank r uses GPU r.
  std::vector<int32_t> gpus;
};

/// One rank alone without NCCL: an event-based rank (its host group of one never blocks).
/// Several ranks, or NCCL: detached ranks (each blocks in its collectives on its own thread),
/// joined by one host communicator group, by opt.communicators, or by the NCCL communicator they
/// join at start.
std::vector<rank_actor> spawn_rank_group(caf::actor_system& sys, const rank_group_options& opt);

} // namespace kvactor
