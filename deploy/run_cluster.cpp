#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "actors/driver/actor.hpp"
#include "actors/runtime_config.hpp"
#include "deploy/cli.hpp"
#include "deploy/cluster.hpp"
#include "deploy/lists.hpp"
#include "deploy/run_config.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/run_report.hpp"
#include "deploy/tp_flags.hpp"
#include "messages/register.hpp"

namespace kvactor {

namespace {

int refuse_cluster_run(std::ostream& err, const std::string& message) {
  fmt::print(err, "kvactor run: error: {}\n", message);
  return exit_bad_input;
}

// The GPU of the first node, as it reported it in its hello.
std::optional<kernels::gpu_info> node_gpu(const cluster& c) {
  const auto& n = c.infos.front();
  if (n.device != device_kind::cuda) return std::nullopt;
  kernels::gpu_info g;
  g.name = "node " + n.address;
  g.total_bytes = n.gpu_total_bytes;
  g.free_bytes = n.gpu_free_bytes;
  return g;
}

// Leaving early: the nodes' ranks stop, the nodes stay for the next run.
struct cluster_release {
  caf::actor_system& sys;
  cluster& nodes;
  ~cluster_release() {
    for (auto& r : nodes.ranks)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    release_cluster(sys, nodes);
  }
};

// A rank lost while the group started: nothing ran yet, so every request is reported not run
// and the run ends with the loss, which a rebuild then serves.
void treat_start_loss_as_run(session_result& s, const std::vector<request_spec>& workload) {
  const auto why = s.failure->err;
  s.failure.reset();
  s.summary = run_summary{};
  for (const auto& r : workload)
    s.summary.results.push_back({r.request_id, false, {}, 0, "not run: " + why.message});
  s.summary.failed = static_cast<int64_t>(workload.size());
  s.summary.error = why;
}

// --restart-policy rebuild: a lost node is waited for, the group rebuilt, the rest re-run (at
// most three times).
restart_log rebuild_while_lost(guarded_transport& net, cluster& nodes, rebuild_request req,
                               const run_options& o, session_result& s, std::ostream& err) {
  restart_log log;
  if (s.failure && rebuild_helps(s.failure->err)) treat_start_loss_as_run(s, req.workload);
  while (!s.failure && rebuild_helps(s.summary.error) && log.restarts < 3) {
    log.lost.push_back(s.summary.error.message);
    fmt::print(err, "kvactor run: {}; waiting up to {:.0f} s to rebuild the group\n",
               s.summary.error.message, std::chrono::duration<double>(o.restart_wait).count());
    err.flush();
    req.epoch = static_cast<uint64_t>(log.restarts) + 2;
    auto merged = rebuild_and_rerun(net, nodes, req, s.summary);
    ++log.restarts;
    if (!merged) {
      s.summary.error.message += "; " + merged.err().message;
      break;
    }
    s.summary = std::move(*merged);
  }
  return log;
}

} // namespace

// --restart-policy rebuild: the group rebuilt on the nodes and what did not finish served again.
restart_log rebuild_if_asked(cluster_context& c, const run_flags& flags, const run_options& o,
                             session_result& session, std::ostream& err) {
  if (o.restart != restart_policy::rebuild || session.interrupted != 0) return {};
  rebuild_request req;
  req.addresses = c.addresses;
  req.world = flags.plan.tensor_parallel_size;
  req.device = c.nodes.infos.front().device;
  req.collective_timeout = c.collective_timeout;
  req.tls = o.tls;
  req.wait = o.restart_wait;
  req.configs = c.run.configs;
  req.workload = c.run.workload;
  req.step_channel = o.steps == step_path::channel;
  req.step_spin = o.step_spin;
  return rebuild_while_lost(c.net, c.nodes, std::move(req), o, session, err);
}

bool rebuild_helps(const error& e) {
  return e.code == errc::rank_lost || e.code == errc::collective_failed;
}

expected<int> with_cluster(const run_flags& flags, const run_options& o,
                           const std::function<int(cluster_context&)>& body) {
  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  configure_cluster_middleman(cfg, o.tls);
  auto auth = transport_auth_for(o.tls.enabled());
  if (!auth) return auth.err();
  caf::actor_system sys{cfg};
  guarded_transport net{sys, o.transport, std::move(*auth)};
  const int32_t tp = flags.plan.tensor_parallel_size;
  auto timeout = parse_collective_timeout(flags.tp.collective_timeout_s);
  if (!timeout) return timeout.err();
  const auto addresses = split_commas(flags.nodes);
  auto connected = connect_cluster(net, addresses, tp, o.device, *timeout, o.tls);
  if (!connected) return connected.err();
  cluster nodes = std::move(*connected);
  cluster_release release{sys, nodes};
  auto channels = open_step_channels(net, nodes, o.tls, o.steps == step_path::channel);
  const auto device = nodes.infos.front().device;
  spdlog::info("cluster: {} rank(s) on {} node(s), {}", tp, nodes.nodes.size(), to_string(device));
  auto run = configure_run(flags, o, device, node_gpu(nodes));
  if (!run) return run.err();
  cluster_context c{sys, net, nodes, *run, channels, *timeout, addresses};
  return body(c);
}

driver_setup cluster_driver_setup(const cluster_context& c, const run_options& o,
                                  std::function<void(const run_progress&)> progress,
                                  std::shared_ptr<trace_recorder> recorder) {
  driver_setup setup{c.nodes.ranks, c.run.configs, 1, std::move(progress), std::move(recorder)};
  setup.bootstrap_communicator = true; // sockets between CPU nodes, NCCL between GPU nodes
  setup.collective_timeout = c.collective_timeout;
  setup.rank_locations = c.nodes.locations;
  setup.routes = c.nodes.routes;
  setup.deadlines = o.chaos.deadlines;
  setup.chaos = o.chaos.chaos;
  setup.channel = c.channels;
  return setup;
}

int run_on_cluster(const run_flags& flags, const run_options& o, std::ostream& out,
                   std::ostream& err, interrupt_watch* interrupts) {
  auto metrics = serve_metrics(flags);
  if (!metrics) return refuse_cluster_run(err, metrics.err().message);
  auto code = with_cluster(flags, o, [&](cluster_context& c) {
    auto rec = open_recording(flags.record, c.run.workload);
    if (!rec) return refuse_cluster_run(err, rec.err().message);
    const auto recorder = *rec ? (*rec)->recorder : nullptr;
    auto drv =
        c.sys.spawn(driver, cluster_driver_setup(c, o,
                                                 metrics->observing(progress_callbacks(
                                                     flags.progress && isatty(STDERR_FILENO) == 1,
                                                     flags.stats_interval_s, c.run.device, err)),
                                                 recorder));
    attach_step_channels(c.channels, drv, o.step_spin);
    auto session = serve(
        c.sys, drv, c.run.workload,
        [&](const std::vector<rank_ready>& ready) -> std::optional<run_failure> {
          print_run_header(c.run, ready, out);
          metrics->ready(ready);
          return std::nullopt;
        },
        interrupts);
    caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
    for (const auto& r : c.nodes.ranks)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    const auto restarts = rebuild_if_asked(c, flags, o, session, err);
    metrics->ended(session);
    return report_run(flags, c.run, session, restarts, rec->get(), out, err);
  });
  return code ? *code : refuse_cluster_run(err, code.err().message);
}

} // namespace kvactor
