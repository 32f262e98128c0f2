#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "actors/driver/actor.hpp"
#include "actors/inject/actor.hpp"
#include "actors/rank/group.hpp"
#include "actors/runtime_config.hpp"
#include "deploy/cli.hpp"
#include "deploy/metrics_server.hpp"
#include "deploy/run_config.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/run_report.hpp"
#include "deploy/tp_flags.hpp"
#include "kvactor/comm/device_local_communicator.h"
#include "kvactor/comm/nccl_communicator.h"
#include "kvactor/kernels/device_runtime.h"
#include "messages/register.hpp"
#include "model/loader.hpp"
#include "net/guarded_transport.hpp"

namespace kvactor {

namespace {

int bad(std::ostream& err, const std::string& message) {
  fmt::print(err, "kvactor run: error: {}\n", message);
  return exit_bad_input;
}

struct local_device {
  device_kind device = device_kind::cpu;
  std::optional<kernels::gpu_info> gpu;
};

// auto: the GPU when one answers (several GPU ranks when NCCL joins them and there are as many
// GPUs), else the CPU.
expected<local_device> resolve_device(std::optional<device_kind> wanted, int32_t tp) {
  std::string no_gpu;
  local_device d;
  d.gpu = kernels::probe_gpu(0, &no_gpu);
  if (!wanted) {
    std::string ignored;
    const bool gpus_for_tp =
        tp == 1 || (comm::nccl_available(&ignored) && tp <= kernels::gpu_count(&ignored));
    d.device = d.gpu && gpus_for_tp ? device_kind::cuda : device_kind::cpu;
    spdlog::info("--device auto: {}{}", to_string(d.device),
                 d.gpu ? "" : fmt::format(" ({})", no_gpu));
    return d;
  }
  d.device = *wanted;
  if (d.device == device_kind::cuda && !d.gpu)
    return make_error(errc::unsupported, fmt::format("--device cuda: no usable GPU: {}", no_gpu));
  return d;
}

// Live injection, once the ranks are ready: loopback only, so that nothing off this machine can
// reach the actors.
std::optional<run_failure> listen_for_injection(guarded_transport& net, const run_flags& flags,
                                                const injector_actor& gateway, std::ostream& err) {
  auto port = net.publish(gateway, *flags.inject_port, "127.0.0.1");
  if (!port)
    return run_failure{
        exit_bad_input,
        make_error(errc::io_error, fmt::format("--inject-port: cannot listen on 127.0.0.1:{}: {}",
                                               *flags.inject_port, port.err().message))};
  fmt::print(err, "kvactor run: injection listens on 127.0.0.1:{}\n", *port);
  err.flush();
  return std::nullopt;
}

} // namespace

session_result serve_locally(caf::actor_system& sys, const local_serving& s, std::ostream& err) {
  rank_group_options group;
  group.world = s.flags.plan.tensor_parallel_size;
  group.nccl = s.tp.nccl;
  group.collective_timeout = s.tp.collective_timeout;
  group.stall = s.tp.stall;
  group.fail_capture = s.tp.fail_capture;
  group.step_faults = s.chaos.faults;
  group.chaos = s.chaos.chaos;
  group.recorder = s.recorder;
  group.gpus = s.tp.gpus;
  if (s.tp.device_local) try {
      group.communicators = comm::make_device_local_group(
          group.world, s.tp.gpus.empty() ? 0 : s.tp.gpus.front(), s.tp.collective_timeout);
    } catch (const comm::collective_error& e) {
      session_result failed;
      failed.failure = run_failure{exit_failure, make_error(errc::collective_failed, e.what())};
      return failed;
    }
  const auto ranks = spawn_rank_group(sys, group);
  auto progress = progress_callbacks(s.flags.progress && isatty(STDERR_FILENO) == 1,
                                     s.flags.stats_interval_s, s.run.device, err);
  if (s.metrics) progress = s.metrics->observing(std::move(progress));
  driver_setup setup{ranks, s.run.configs, 1, std::move(progress), s.recorder};
  setup.bootstrap_communicator = s.tp.nccl;
  setup.collective_timeout = s.tp.collective_timeout;
  setup.on_tokens = s.on_tokens;
  setup.deadlines = s.chaos.deadlines;
  setup.chaos = s.chaos.chaos;
  setup.outputs = s.outputs;
  setup.keep_serving = s.keep_serving;
  auto drv = sys.spawn(driver, std::move(setup));
  auto on_ready = [&](const std::vector<rank_ready>& ready) -> std::optional<run_failure> {
    return s.on_ready ? s.on_ready(drv, ranks, ready) : std::nullopt;
  };
  auto session = serve(sys, drv, s.run.workload, on_ready, s.interrupts);
  caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
  for (const auto& r : ranks)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  return session;
}

expected<local_start> prepare_local_run(const run_flags& flags, const run_options& o) {
  const int32_t tp = flags.plan.tensor_parallel_size;
  auto device = resolve_device(o.device, tp);
  if (!device) return device.err();
  auto tp_setup = resolve_tp_flags(flags.tp, device->device, tp);
  if (!tp_setup) return tp_setup.err();
  const int32_t sharing = tp_setup->device_local ? tp : 1;
  if (tp_setup->device_local && !tp_setup->gpus.empty() && tp_setup->gpus.front() != 0) {
    std::string why; // the GPU they share is the one to measure
    device->gpu = kernels::probe_gpu(tp_setup->gpus.front(), &why);
    if (!device->gpu)
      return make_error(errc::unsupported,
                        fmt::format("--gpu-ids: GPU {}: {}", tp_setup->gpus.front(), why));
  }
  auto run = configure_run(flags, o, device->device, device->gpu, sharing);
  if (!run) return run.err();
  return local_start{std::move(*run), *tp_setup};
}

int run_locally(const run_flags& flags, const run_options& o, std::ostream& out, std::ostream& err,
                interrupt_watch* interrupts) {
  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  if (flags.inject_port) cfg.load<caf::io::middleman>();
  // Only with --inject-port is anything listening; the guard sits in front of it.
  std::optional<transport_auth> auth;
  if (flags.inject_port) {
    auto found = transport_auth_for(false);
    if (!found) return bad(err, found.err().message);
    auth = std::move(*found);
  }
  auto metrics = serve_metrics(flags);
  if (!metrics) return bad(err, metrics.err().message);
  caf::actor_system sys{cfg};
  std::optional<guarded_transport> net;
  if (auth) net.emplace(sys, o.transport, std::move(*auth));
  auto start = prepare_local_run(flags, o);
  if (!start) {
    metrics->failed(start.err().message);
    return bad(err, start.err().message);
  }
  const auto& run = start->run;
  auto rec = open_recording(flags.record, run.workload);
  if (!rec) return bad(err, rec.err().message);
  const auto recorder = *rec ? (*rec)->recorder : nullptr;
  injector_actor gateway;
  local_serving serving{flags, run, start->tp, recorder, {}};
  serving.chaos = o.chaos;
  serving.metrics = &*metrics;
  serving.interrupts = interrupts;
  serving.on_ready = [&](const driver_actor& drv, const std::vector<rank_actor>& ranks,
                         const std::vector<rank_ready>& ready) -> std::optional<run_failure> {
    if (flags.inject_port) {
      gateway = sys.spawn(injector, injector_setup{drv, ranks, recorder});
      if (auto failed = listen_for_injection(*net, flags, gateway, err)) return failed;
    }
    print_run_header(run, ready, out);
    metrics->ready(ready);
    return std::nullopt;
  };
  const auto session = serve_locally(sys, serving, err);
  metrics->ended(session);
  if (gateway) caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  return report_run(flags, run, session, {}, rec->get(), out, err);
}

} // namespace kvactor
