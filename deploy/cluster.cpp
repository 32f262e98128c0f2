#include "deploy/cluster.hpp"

#include "deploy/run_session.hpp"
#include "net/tcp_probe.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/driver/actor.hpp"
#include "actors/node/node_core.hpp"
#include "messages/caf_error.hpp"
#include "messages/codec.hpp"

namespace kvactor {

namespace {

constexpr auto hello_timeout = std::chrono::seconds(10);

} // namespace

status check_step_spin(int64_t us) {
  if (us >= 0 && us <= 100'000) return ok();
  return make_error(errc::invalid_argument,
                    fmt::format("--step-spin-us: {} is outside [0, 100000] (microseconds a step "
                                "channel polls before it sleeps)",
                                us));
}

status check_tls(const tls_files& tls) {
  if (!tls.enabled()) return ok();
  for (auto [flag, file] : {std::pair{"--tls-cert", &tls.cert}, std::pair{"--tls-key", &tls.key},
                            std::pair{"--tls-ca", &tls.ca}}) {
    if (file->empty())
      return make_error(errc::invalid_argument,
                        fmt::format("{}: missing; --tls-cert, --tls-key and --tls-ca go together "
                                    "(mutual TLS needs all three)",
                                    flag));
    if (std::ifstream in(*file); !in)
      return make_error(errc::invalid_argument, fmt::format("{}: cannot read '{}'", flag, *file));
  }
  return ok();
}

void configure_cluster_middleman(caf::actor_system_config& cfg, const tls_files& tls) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{cluster_heartbeat});
  cfg.set("middleman.connection-timeout", caf::timespan{cluster_connection_timeout});
  if (tls.enabled()) {
    // With a certificate, a key and a CA, CAF's OpenSSL sessions verify the peer on both sides
    // (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT): no certificate, no connection.
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = tls.cert;
    cfg.openssl_key = tls.key;
    cfg.openssl_cafile = tls.ca;
  }
}

expected<uint16_t> publish_node(guarded_transport& net, const node_actor& node, uint16_t port,
                                const std::string& host) {
  return net.publish(node, port, host);
}

namespace {

// The node's actor. A listener shedding a connection flood may cut a handshake it has not yet
// authenticated, ours included: a few more attempts, a fifth of a second apart, before the
// driver gives up on a node that answered the probe.
expected<node_actor> connect_node(guarded_transport& net, const std::string& host, uint16_t port) {
  constexpr int attempts = 5;
  auto node = net.remote_actor<node_actor>(host, port);
  for (int i = 1; i < attempts && !node; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    node = net.remote_actor<node_actor>(host, port);
  }
  return node;
}

// Rank r on placement p: its node's route (made when the node gets its first rank).
void add_to_route(cluster& c, const rank_placement& p, int32_t r) {
  const auto& node = c.nodes[static_cast<size_t>(p.node)];
  auto it = std::find_if(c.routes.begin(), c.routes.end(),
                         [&](const node_route& route) { return route.node == node; });
  if (it == c.routes.end()) {
    const auto& info = c.infos[static_cast<size_t>(p.node)];
    auto hp = parse_host_port(info.address, "--nodes");
    c.channels.push_back({hp ? hp->first : std::string{}, hp ? info.step_port : uint16_t{0}});
    it = c.routes.insert(c.routes.end(), node_route{node, {}, {}});
  }
  it->ranks.push_back(r);
  it->slots.push_back(p.slot);
}

} // namespace

expected<cluster> connect_cluster(guarded_transport& net, const std::vector<std::string>& addresses,
                                  int32_t world, std::optional<device_kind> device,
                                  std::chrono::milliseconds collective_timeout,
                                  const tls_files& tls) {
  auto& sys = net.system();
  cluster c;
  caf::scoped_actor self{sys};
  for (const auto& a : addresses) {
    auto hp = parse_host_port(a, "--nodes");
    if (!hp) return hp.err();
    if (!tls.enabled() && !is_loopback(hp->first))
      return make_error(errc::invalid_argument,
                        fmt::format("--nodes: {} is off this machine: its node requires mutual "
                                    "TLS; give --tls-cert, --tls-key and --tls-ca",
                                    a));
    // The middleman's connect has no deadline of its own: probe first, within the cluster's.
    if (auto reachable = tcp_probe(hp->first, hp->second, cluster_connection_timeout); !reachable)
      return make_error(errc::io_error, fmt::format("--nodes: node {} is unreachable: {}", a,
                                                    reachable.err().message));
    auto node = connect_node(net, hp->first, hp->second);
    if (!node)
      return make_error(errc::io_error,
                        fmt::format("--nodes: node {} is unreachable{}: {}", a,
                                    tls.enabled() ? " or refused this driver's certificate" : "",
                                    node.err().message));
    std::optional<error> failed;
    self->request(*node, hello_timeout, atom::hello_v, cluster_protocol, schema_version,
                  kvactor_build_id())
        .receive([&](node_info& info) { c.infos.push_back(std::move(info)); },
                 [&](caf::error& e) {
                   failed = make_error(errc::incompatible_specs,
                                       fmt::format("--nodes: node {} refused this driver: {}", a,
                                                   from_caf_error(e).message));
                 });
    if (failed) return *failed;
    // The node checked us; check it too (a node of another build may answer all the same).
    node_info mine{cluster_protocol, schema_version, kvactor_build_id(), "", {}, 0, 0, 0, 0, 0};
    const auto& theirs = c.infos.back();
    if (auto ok = check_peer(mine, theirs.protocol, theirs.schema, theirs.build); !ok)
      return make_error(errc::incompatible_specs,
                        fmt::format("--nodes: node {}: {}", a, ok.err().message));
    c.infos.back().address = a;
    c.nodes.push_back(*node);
  }
  if (device && !c.infos.empty() && c.infos.front().device != *device)
    return make_error(errc::invalid_argument,
                      fmt::format("--device {}: node {} hosts {} ranks", to_string(*device),
                                  c.infos.front().address, to_string(c.infos.front().device)));
  auto placed = place_ranks(c.infos, world);
  if (!placed) return placed.err();
  for (int32_t r = 0; r < world; ++r) {
    const auto& p = (*placed)[static_cast<size_t>(r)];
    const auto& addr = c.infos[static_cast<size_t>(p.node)].address;
    std::optional<error> failed;
    self->request(c.nodes[static_cast<size_t>(p.node)], hello_timeout, atom::spawn_v,
                  rank_spawn{r, world, p.slot, collective_timeout.count()})
        .receive(
            [&](caf::strong_actor_ptr& h) {
              c.ranks.push_back(caf::actor_cast<rank_actor>(std::move(h)));
              c.locations.push_back(fmt::format("node {} slot {}", addr, p.slot));
              add_to_route(c, p, r);
            },
            [&](caf::error& e) {
              failed = make_error(errc::io_error,
                                  fmt::format("--nodes: node {} could not spawn rank {}: {}", addr,
                                              r, from_caf_error(e).message));
            });
    if (failed) {
      release_cluster(sys, c);
      return *failed;
    }
    spdlog::info("cluster: rank {} on {}", r, c.locations.back());
  }
  return c;
}

std::shared_ptr<step_channel_client> open_step_channels(const guarded_transport& net,
                                                        const cluster& c, const tls_files& tls,
                                                        bool wanted) {
  if (!wanted) return nullptr;
  step_channel_auth auth{net.auth().cookie, nullptr};
  if (tls.enabled()) {
    auto context = step_tls::make(tls.cert, tls.key, tls.ca, false);
    if (!context) {
      spdlog::warn("driver: step channels: {}; steps go through the middleman",
                   context.err().message);
      return nullptr;
    }
    auth.tls = *context;
  }
  return step_channel_client::connect(c.channels, auth, net.limits().frames.max_message_bytes,
                                      cluster_connection_timeout);
}

void attach_step_channels(const std::shared_ptr<step_channel_client>& channels,
                          const driver_actor& drv, std::chrono::microseconds spin) {
  if (!channels) return;
  // Weak: the driver holds the channels, whose reader must not keep the driver alive.
  channels->start(
      [weak = caf::actor_cast<caf::weak_actor_ptr>(drv)](node_channel_event e) {
        if (auto strong = weak.lock())
          caf::anon_send(caf::actor_cast<driver_actor>(strong), std::move(e));
      },
      spin);
}

void release_cluster(caf::actor_system&, const cluster& c) {
  // Fire and forget: a dead node must not hold the driver up.
  for (const auto& n : c.nodes)
    caf::anon_send(n, atom::release_v);
}

expected<run_summary> rebuild_and_rerun(guarded_transport& net, cluster& c,
                                        const rebuild_request& req, const run_summary& first) {
  auto& sys = net.system();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& r : c.ranks)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  release_cluster(sys, c);
  // The nodes come back (a restarted process at the same address); the survivors free their
  // slots as their old ranks stop.
  std::optional<cluster> fresh;
  std::string last;
  const auto deadline = t0 + req.wait;
  while (std::chrono::steady_clock::now() < deadline) {
    auto again =
        connect_cluster(net, req.addresses, req.world, req.device, req.collective_timeout, req.tls);
    if (again) {
      fresh = std::move(*again);
      break;
    }
    last = again.err().message;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (!fresh)
    return make_error(errc::io_error,
                      fmt::format("--restart-policy rebuild: the nodes did not come back within "
                                  "{:.0f} s ({})",
                                  std::chrono::duration<double>(req.wait).count(), last));
  c = std::move(*fresh);
  std::vector<request_spec> again;
  std::set<uint64_t> unfinished;
  for (const auto& r : first.results)
    if (!r.finished) unfinished.insert(r.request_id);
  for (auto spec : req.workload)
    if (unfinished.count(spec.request_id) > 0) {
      spec.arrival_ns = 0;
      again.push_back(std::move(spec));
    }
  spdlog::warn("cluster: group rebuilt in {:.2f} s; re-running {} request(s)",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               again.size());
  auto channels = open_step_channels(net, c, req.tls, req.step_channel);
  driver_setup setup{c.ranks, req.configs, req.epoch, {}, nullptr};
  setup.routes = c.routes;
  setup.channel = channels;
  setup.bootstrap_communicator = true;
  setup.collective_timeout = req.collective_timeout;
  setup.rank_locations = c.locations;
  auto drv = sys.spawn(driver, std::move(setup));
  attach_step_channels(channels, drv, req.step_spin);
  auto second_run = serve(sys, drv, again);
  caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
  if (second_run.failure) return second_run.failure->err;
  const auto& second = second_run.summary;
  // Merge: the first run's finished requests, the second run's answer for the others.
  run_summary merged = second;
  merged.results.clear();
  std::map<uint64_t, const request_result*> redone;
  for (const auto& r : second.results)
    redone[r.request_id] = &r;
  for (const auto& r : first.results) {
    auto it = redone.find(r.request_id);
    merged.results.push_back(it != redone.end() ? *it->second : r);
  }
  merged.finished = 0;
  merged.failed = 0;
  for (const auto& r : merged.results)
    (r.finished ? merged.finished : merged.failed) += 1;
  merged.preempted += first.preempted;
  merged.prompt_tokens += first.prompt_tokens;
  merged.generated_tokens += first.generated_tokens;
  merged.steps += first.steps;
  merged.wall_s += first.wall_s;
  merged.graph_replays += first.graph_replays;
  merged.eager_steps += first.eager_steps;
  merged.output_digest = output_digest(merged.results);
  return merged;
}

} // namespace kvactor
