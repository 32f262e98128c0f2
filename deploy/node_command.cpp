#include "deploy/node_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>

#include "actors/node/actor.hpp"
#include "actors/runtime_config.hpp"
#include "actors/step_timeline.hpp"
#include "deploy/cli.hpp"
#include "deploy/cluster.hpp"
#include "deploy/interrupt.hpp"
#include "deploy/lists.hpp"
#include "deploy/metrics_server.hpp"
#include "kvactor/kernels/device_runtime.h"
#include "messages/codec.hpp"
#include "messages/register.hpp"
#include "net/step_channel_server.hpp"

namespace kvactor {

namespace {

expected<std::vector<int32_t>> parse_gpus(const std::string& text) {
  auto out = parse_int_list(text, "--gpus");
  if (out)
    for (int32_t g : *out)
      if (g < 0)
        return make_error(errc::invalid_argument,
                          fmt::format("--gpus: {} is not a GPU index in '{}'", g, text));
  return out;
}

// Where the node listens and how it authenticates its peers.
struct listen_at {
  std::string host;
  uint16_t port = 0;
  tls_files tls;
  transport_limits transport;
};

// The flags checked before anything starts: the address, TLS off loopback, one kind of rank.
expected<listen_at> check_flags(const node_flags& flags) {
  auto hp = parse_host_port(flags.listen, "--listen", true);
  if (!hp) return hp.err();
  listen_at at{hp->first, hp->second, {flags.tls_cert, flags.tls_key, flags.tls_ca}, {}};
  if (auto ok = check_tls(at.tls); !ok) return ok.err();
  auto limits = transport_limits_from(flags.max_message_bytes);
  if (!limits) return limits.err();
  at.transport = *limits;
  if (!is_loopback(at.host) && !at.tls.enabled())
    return make_error(errc::invalid_argument,
                      fmt::format("--listen {}: a node reachable from other machines must "
                                  "authenticate them: give --tls-cert, --tls-key and --tls-ca, "
                                  "or listen on 127.0.0.1",
                                  flags.listen));
  if (flags.cpu_ranks && !flags.gpus.empty())
    return make_error(errc::invalid_argument,
                      "--cpu-ranks and --gpus: a node hosts one kind of rank");
  if (flags.cpu_ranks && (*flags.cpu_ranks < 1 || *flags.cpu_ranks > 64))
    return make_error(
        errc::invalid_argument,
        fmt::format("--cpu-ranks: {} is outside [1, 64] (CPU rank slots)", *flags.cpu_ranks));
  if (auto ok = check_step_spin(flags.step_spin_us); !ok) return ok.err();
  return at;
}

// Where rank 0 of a CPU group listens for its peers: this node's address as others reach it
// (a wildcard listen address names no host: the machine's name then).
std::string socket_host_of(const std::string& host) {
  std::string out = host == "localhost" ? "127.0.0.1" : host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) out = name;
  }
  return out;
}

// The rank slots: the GPUs of --gpus, else every visible GPU, else --cpu-ranks CPU ranks.
status assign_slots(const node_flags& flags, node_setup& setup) {
  std::string why_no_gpu;
  const int visible = kernels::gpu_count(&why_no_gpu);
  if (!flags.gpus.empty() || (!flags.cpu_ranks && visible > 0)) {
    if (!flags.gpus.empty()) {
      auto g = parse_gpus(flags.gpus);
      if (!g) return g.err();
      setup.gpus = *g;
    } else {
      for (int i = 0; i < visible; ++i)
        setup.gpus.push_back(i);
    }
    for (int32_t g : setup.gpus)
      if (g >= visible)
        return make_error(errc::invalid_argument,
                          fmt::format("--gpus: GPU {} does not exist ({} visible{})", g, visible,
                                      why_no_gpu.empty() ? "" : ": " + why_no_gpu));
    setup.info.device = device_kind::cuda;
    setup.info.slots = static_cast<int32_t>(setup.gpus.size());
  } else {
    const int32_t n = flags.cpu_ranks.value_or(1);
    if (n < 1 || n > 64)
      return make_error(errc::invalid_argument,
                        fmt::format("--cpu-ranks: {} is outside [1, 64]", n));
    setup.info.device = device_kind::cpu;
    setup.info.slots = n;
  }
  return ok();
}

// What the node tells drivers about itself, and the slots it offers.
expected<node_setup> set_up_node(const node_flags& flags, const std::string& host) {
  node_setup setup;
  setup.info.protocol = cluster_protocol;
  setup.info.schema = schema_version;
  setup.info.build = kvactor_build_id();
  setup.info.pid = static_cast<int64_t>(::getpid());
  setup.socket_host = socket_host_of(host);
  setup.build_override = flags.debug_build_id;
  if (auto ok = assign_slots(flags, setup); !ok) return ok.err();
  return setup;
}

void configure_node_system(caf::actor_system_config& cfg, const node_setup& setup,
                           const tls_files& tls) {
  register_types(cfg);
  configure_step_latency(cfg);
  // Ranks blocked in collectives hold scheduler threads: leave two for builders and messages.
  cfg.set("scheduler.max-threads",
          static_cast<size_t>(std::max<unsigned>(std::thread::hardware_concurrency(),
                                                 static_cast<unsigned>(setup.info.slots) + 2)));
  configure_cluster_middleman(cfg, tls);
}

void print_listening(std::ostream& out, const listen_at& at, uint16_t bound,
                     const node_setup& setup) {
  const auto steps = setup.info.step_port != 0
                         ? fmt::format("steps on port {}", setup.info.step_port)
                         : std::string{"steps through the middleman"};
  fmt::print(out,
             "kvactor node: listening on {}:{} ({} {} rank slot(s), {}, {}, build {}, pid {})\n",
             at.host, bound, setup.info.slots, to_string(setup.info.device),
             at.tls.enabled() ? "mutual TLS" : "loopback, cluster cookie", steps, setup.info.build,
             setup.info.pid);
  out.flush();
}

// The step channel beside the middleman: its drivers prove the cluster cookie, or under TLS
// present a certificate of the CA (with the node's own certificate and key).
expected<std::unique_ptr<step_channel_server>> open_step_channel(const listen_at& at,
                                                                 const guarded_transport& net,
                                                                 std::chrono::microseconds spin) {
  step_channel_auth auth{net.auth().cookie, nullptr};
  if (at.tls.enabled()) {
    auto tls = step_tls::make(at.tls.cert, at.tls.key, at.tls.ca, true);
    if (!tls) return tls.err();
    auth.tls = *tls;
  }
  step_channel_limits limits;
  limits.max_frame_bytes = net.limits().frames.max_message_bytes;
  limits.proof_timeout = net.limits().connections.handshake_timeout;
  limits.max_pending = net.limits().connections.max_pending;
  limits.spin = spin;
  auto server = step_channel_server::listen(at.host, 0, std::move(auth), limits);
  if (!server) return server.err();
  return std::move(*server);
}

// SIGINT or SIGTERM: the node stops (a second one exits at once). A handler, not a blocked mask:
// OpenBLAS starts its threads when it loads, before main, with every signal open, and one of them
// taking a SIGTERM's default action killed the node instead of stopping it.
void wait_for_signal(interrupt_watch& watch) {
  std::promise<int> first;
  watch.on_interrupt([&first](int sig) { first.set_value(sig); });
  const int sig = first.get_future().get();
  spdlog::info("node: {}: stopping", signal_name(sig));
}

// The node's health for --metrics-port: starting until it listens, then ready until a signal.
struct node_health {
  std::atomic<int> state{static_cast<int>(health_state::starting)};
  int32_t slots = 0;
  std::string device;
  std::shared_ptr<node_rank_counts> counts = std::make_shared<node_rank_counts>();
  health_report report() const {
    const auto s = static_cast<health_state>(state.load());
    if (s == health_state::finished) return {s, "stopping"};
    return {s, s == health_state::starting ? "not listening yet" : ""};
  }
  std::string metrics() const {
    const bool ready = static_cast<health_state>(state.load()) == health_state::ready;
    return fmt::format("# HELP kvactor:ready 1 while the node serves drivers (/health 200).\n"
                       "# TYPE kvactor:ready gauge\nkvactor:ready {}\n"
                       "# HELP kvactor:node_rank_slots Rank slots this node offers.\n"
                       "# TYPE kvactor:node_rank_slots gauge\n"
                       "kvactor:node_rank_slots{{device=\"{}\"}} {}\n"
                       "# HELP kvactor:node_ranks_hosted Ranks running on this node now.\n"
                       "# TYPE kvactor:node_ranks_hosted gauge\nkvactor:node_ranks_hosted {}\n"
                       "# HELP kvactor:node_ranks_started_total Ranks this node spawned.\n"
                       "# TYPE kvactor:node_ranks_started_total counter\n"
                       "kvactor:node_ranks_started_total {}\n"
                       "# HELP kvactor:node_ranks_stopped_total Ranks that stopped, for any "
                       "reason.\n"
                       "# TYPE kvactor:node_ranks_stopped_total counter\n"
                       "kvactor:node_ranks_stopped_total {}\n",
                       ready ? 1 : 0, device, slots, counts->hosted.load(), counts->started.load(),
                       counts->stopped.load());
  }
};

void shut_down(const node_actor& n) {
  caf::anon_send(n, atom::release_v);
  caf::anon_send_exit(n, caf::exit_reason::user_shutdown);
}

} // namespace

int run_node(const node_flags& flags, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& why) {
    fmt::print(err, "kvactor node: error: {}\n", why);
    return exit_bad_input;
  };
  interrupt_watch stop; // from the start: a signal while starting stops the node too
  auto at = check_flags(flags);
  if (!at) return bad(at.err().message);
  auto setup = set_up_node(flags, at->host);
  if (!setup) return bad(setup.err().message);
  auto health = std::make_shared<node_health>();
  health->slots = setup->info.slots;
  health->device = std::string{to_string(setup->info.device)};
  setup->counts = health->counts;
  std::unique_ptr<metrics_server> metrics;
  if (flags.metrics_port) {
    auto server = metrics_server::start([health] { return health->metrics(); },
                                        [health] { return health->report(); }, flags.metrics_host,
                                        *flags.metrics_port);
    if (!server) return bad(server.err().message);
    metrics = std::move(*server);
    spdlog::info("node: metrics on http://{}:{}/metrics and /health", flags.metrics_host,
                 metrics->port());
  }
  caf::actor_system_config cfg;
  configure_node_system(cfg, *setup, at->tls);
  auto auth = transport_auth_for(at->tls.enabled());
  if (!auth) return bad(auth.err().message);
  caf::actor_system sys{cfg};
  guarded_transport net{sys, at->transport, std::move(*auth)};
  auto channel = open_step_channel(*at, net, std::chrono::microseconds(flags.step_spin_us));
  if (!channel) return bad(fmt::format("--listen {}: {}", flags.listen, channel.err().message));
  setup->info.step_port = (*channel)->port();
  if (!flags.debug_step_times.empty())
    step_timeline::enable(fmt::format("node:{}", setup->info.step_port), flags.debug_step_times);
  setup->sinks = (*channel)->sinks();
  auto n = sys.spawn(node, *setup);
  auto bound = publish_node(net, n, at->port, at->host);
  if (!bound) {
    caf::anon_send_exit(n, caf::exit_reason::user_shutdown);
    return bad(fmt::format("--listen {}: cannot listen: {}", flags.listen, bound.err().message));
  }
  (*channel)->serve(n);
  print_listening(out, *at, *bound, *setup);
  health->state = static_cast<int>(health_state::ready);
  wait_for_signal(stop);
  health->state = static_cast<int>(health_state::finished);
  shut_down(n);
  return exit_ok;
}

} // namespace kvactor
