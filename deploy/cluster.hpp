// Cluster mode on the driver's side (`kvactor run --nodes`): connect to every node, check that it
// speaks this build's protocol, place the ranks on the nodes' slots and spawn them there. Also the
// middleman settings both sides use, so that a dead peer or a cut link is noticed in seconds.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/driver/actor.hpp"
#include "actors/interfaces.hpp"
#include "messages/errc.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "net/guarded_transport.hpp"
#include "net/step_channel_client.hpp"

namespace kvactor {

/// Heartbeats every 0.5 s; a connection silent for 3 s is dropped, which ends every remote
/// actor behind it (a down message to whoever monitors them). CAF's own default waits 30 s.
inline constexpr std::chrono::milliseconds cluster_heartbeat{500};
inline constexpr std::chrono::milliseconds cluster_connection_timeout{3000};

/// Mutual TLS between nodes and drivers (CAF's OpenSSL module): this process's certificate and key,
/// and the CA every peer's certificate must chain to. All three or none.
struct tls_files {
  std::string cert, key, ca;
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

/// All three given and readable, or none; errors name the flag and the file.
status check_tls(const tls_files& tls);

/// --step-spin-us (a node's and a cluster run's): [0, 100000] microseconds.
status check_step_spin(int64_t us);

/// Loads the middleman with the cluster's heartbeat and connection timeout, and with `tls` the
/// OpenSSL module (peers then need a certificate signed by tls.ca, both ways).
void configure_cluster_middleman(caf::actor_system_config& cfg, const tls_files& tls = {});

/// Publishes the node on host:port through the guarded transport (over TLS when it was made with
/// TLS); the bound port.
expected<uint16_t> publish_node(guarded_transport& net, const node_actor& node, uint16_t port,
                                const std::string& host);

struct cluster {
  std::vector<node_actor> nodes;
  std::vector<node_info> infos;                // [nodes]
  std::vector<rank_actor> ranks;               // [world], rank order
  std::vector<std::string> locations;          // [world]: "node HOST:PORT slot S"
  std::vector<node_route> routes;              // the nodes that host ranks, each with its ranks
  std::vector<step_channel_endpoint> channels; // [routes]: where each one's step channel listens
};

/// The step channels of `c`'s routes, proven with the transport's cookie or, with `tls`, mutual
/// TLS; null when `wanted` is false. A route whose node offers no channel, or whose channel cannot
/// connect (a warning says why), takes the middleman.
std::shared_ptr<step_channel_client> open_step_channels(const guarded_transport& net,
                                                        const cluster& c, const tls_files& tls,
                                                        bool wanted = true);

/// Starts `channels` (may be null) reporting to `drv`.
void attach_step_channels(const std::shared_ptr<step_channel_client>& channels,
                          const driver_actor& drv, std::chrono::microseconds spin = {});

/// Connects to `addresses` ("host:port" each), says hello, places `world` ranks and spawns them.
/// `device`: nullopt (auto) takes the nodes' device, else it must match theirs. Errors name the
/// node and what went wrong (unreachable, other build, too few slots); nothing is left spawned on
/// error. A node off loopback is refused without TLS (it would refuse us anyway).
expected<cluster> connect_cluster(guarded_transport& net, const std::vector<std::string>& addresses,
                                  int32_t world, std::optional<device_kind> device,
                                  std::chrono::milliseconds collective_timeout,
                                  const tls_files& tls = {});

/// Stops the ranks of the run on every node (best effort: a dead node is skipped).
void release_cluster(caf::actor_system& sys, const cluster& c);

/// What a run that lost a rank needs to be served again (--restart-policy rebuild).
struct rebuild_request {
  std::vector<std::string> addresses;
  int32_t world = 1;
  std::optional<device_kind> device;
  std::chrono::milliseconds collective_timeout{120'000};
  tls_files tls;
  std::chrono::milliseconds wait{60'000}; // how long the nodes may take to come back
  std::vector<rank_config> configs;
  std::vector<request_spec> workload; // the whole run's, in order
  uint64_t epoch = 2;
  bool step_channel = true; // steps on the nodes' step channels (else through the middleman)
  std::chrono::microseconds step_spin{0}; // --step-spin-us
};

/// The run `first` stopped early (a rank stopped): stops what is left of the old group, waits until
/// every node answers again and has free slots (a restarted node at the same address), rebuilds
/// the group there (new ranks, communicator, KV cache) and serves the requests `first` did not
/// finish, from their prompts (greedy generation makes their outputs those of an uninterrupted
/// run). Returns the two runs merged (request order and digest over every request), and sets
/// `c` to the new group. Errors: the nodes did not come back in time, or the new group failed.
expected<run_summary> rebuild_and_rerun(guarded_transport& net, cluster& c,
                                        const rebuild_request& req, const run_summary& first);

} // namespace kvactor
