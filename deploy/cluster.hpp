// Cluster mode on the driver's side (`kvactor run --nodes`): connect to every node, check that it
// speaks this build's protocol, place the ranks on the nodes' slots and spawn them there. Also the
// middleman settings both sides use, so that a dead peer or a cut link is noticed in seconds.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// Heartbeats every 0.5 s; a connection silent for 3 s is dropped, which ends every remote
/// actor behind it (a down message to whoever monitors them). CAF's own default waits 30 s.
inline constexpr std::chrono::milliseconds cluster_heartbeat{500};
inline constexpr std::chrono::milliseconds cluster_connection_timeout{3000};

/// Loads the middleman with the cluster's heartbeat and connection timeout.
void configure_cluster_middleman(caf::actor_system_config& cfg);

struct cluster {
  std::vector<node_actor> nodes;
  std::vector<node_info> infos;       // [nodes]
  std::vector<rank_actor> ranks;      // [world], rank order
  std::vector<std::string> locations; // [world]: "node HOST:PORT slot S"
};

/// Connects to `addresses` ("host:port" each), says hello, places `world` ranks and spawns them.
/// `device`: "auto" takes the nodes' device, else it must match theirs. Errors name the node and
/// what went wrong (unreachable, other build, too few slots); nothing is left spawned on error.
expected<cluster> connect_cluster(caf::actor_system& sys, const std::vector<std::string>& addresses,
                                  int32_t world, const std::string& device,
                                  std::chrono::milliseconds collective_timeout);

/// Stops the ranks of the run on every node (best effort: a dead node is skipped).
void release_cluster(caf::actor_system& sys, const cluster& c);

} // namespace kvactor
