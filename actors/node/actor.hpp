// The node actor (cluster mode): one per node process, published with CAF's middleman. A driver
// says hello (protocol, schema, build: a mismatch is refused by name), then asks it to spawn the
// ranks of its tensor-parallel group on free slots; the node monitors its ranks and frees a
// slot when its rank stops. Ranks join the communicator the driver bootstraps: NCCL on GPU
// nodes, sockets on CPU nodes. GPU ranks are detached (they block in CUDA and NCCL calls). A CPU
// node with one slot runs its rank event-based, since a detached rank pays a thread wake-up per
// message; with several slots its ranks are detached, so that they run side by side as local
// mode's do. The node runs at least slots + 2 scheduler threads so that ranks blocked in a
// collective never starve a builder.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/node/node_core.hpp"
#include "actors/node/relay_watch.hpp"
#include "actors/node/step_sinks.hpp"
#include "kvactor/comm/communicator.h"

namespace kvactor {

/// What a node's ranks are doing, read from another thread (its --metrics-port).
struct node_rank_counts {
  std::atomic<int32_t> hosted{0};  // ranks running now
  std::atomic<int64_t> started{0}; // ranks spawned since the node started
  std::atomic<int64_t> stopped{0}; // ranks that stopped since, for whatever reason
};

struct node_setup {
  node_info info;            // protocol, schema, build, address, device, slots (busy is kept live)
  std::string socket_host;   // CPU ranks: where rank 0 listens for its peers (the node's host)
  std::vector<int32_t> gpus; // cuda nodes: the GPU of each slot
  /// Testing: a node that claims another build (--debug-build-id).
  std::string build_override;
  /// Updated as ranks start and stop (may be null).
  std::shared_ptr<node_rank_counts> counts;
  /// The step channels' answer sinks (may be null: no channel).
  std::shared_ptr<step_sinks> sinks;
};

/// The communicators of a node's ranks, filled from the ranks' threads as they join.
struct joined_communicators {
  std::mutex mu;
  std::vector<std::weak_ptr<comm::communicator>> all;
  /// Aborts every live one: ranks blocked in a collective (a peer's link is cut, no FIN) fail
  /// at once instead of after the collective timeout, and then take their exit.
  void abort_all(const std::string& why);
};

/// A rank this node hosts: its index in the group and its handle.
struct hosted_rank {
  int32_t rank = 0;
  rank_actor handle;
};

struct node_state {
  node_setup setup;
  std::shared_ptr<joined_communicators> comms = std::make_shared<joined_communicators>();
  std::unique_ptr<node_slots> slots;
  std::map<int32_t, hosted_rank> ranks;                      // slot -> the rank it hosts
  relay_watch watch;                                         // relays awaiting answers, by deadline
  std::optional<relay_watch::clock::time_point> watch_armed; // when the watchdog fires next
  uint64_t watch_timer = 0; // the number of the armed timer; others are superseded
  static inline const char* name = "kvactor.node";
  node_state() = default;
};

node_actor::behavior_type node(node_actor::stateful_pointer<node_state> self, node_setup setup);

} // namespace kvactor
