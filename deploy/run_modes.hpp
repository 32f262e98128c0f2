// The two ways `kvactor run` serves a workload, each orchestrating the same steps: device,
// configuration (run_config.hpp), ranks, driver, session (run_session.hpp), report
// (run_report.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/driver/actor.hpp"
#include "actors/interfaces.hpp"
#include "actors/trace_recorder.hpp"
#include "deploy/cluster.hpp"
#include "deploy/interrupt.hpp"
#include "deploy/run_command.hpp"
#include "deploy/run_config.hpp"
#include "deploy/run_options.hpp"
#include "deploy/run_report.hpp"
#include "deploy/run_session.hpp"
#include "deploy/tp_flags.hpp"

namespace kvactor {

/// A local run's configuration and tensor-parallel setup, the device resolved.
struct local_start {
  run_configuration run;
  tp_setup tp;
};

/// Resolves the device, the tensor-parallel flags and the run's configuration.
expected<local_start> prepare_local_run(const run_flags& flags, const run_options& options);

/// What serve_locally runs: `run`'s ranks and workload; on_ready once every rank is ready.
struct local_serving {
  const run_flags& flags;
  const run_configuration& run;
  const tp_setup& tp;
  std::shared_ptr<trace_recorder> recorder; // null: nothing recorded
  std::function<std::optional<run_failure>(const driver_actor&, const std::vector<rank_actor>&,
                                           const std::vector<rank_ready>&)>
      on_ready;
  /// Each step's sampled tokens as the driver applies them (on the driver's thread); may be empty.
  std::function<void(const std::vector<sampled_token>&)> on_tokens = {};
  /// What --metrics-port serves, fed by the driver's progress reports; null without it.
  const served_metrics* metrics = nullptr;
  /// The step timeout, and --chaos and its faults.
  chaos_setup chaos = {};
  /// SIGINT/SIGTERM drain the run (null: the signals keep their default action).
  interrupt_watch* interrupts = nullptr;
  /// kvactor serve: the driver's output sink (the ingress), and a run that ends only when drained.
  output_sink_actor outputs = {};
  bool keep_serving = false;
};

/// Spawns the ranks and the driver in `sys`, serves the workload, stops them.
session_result serve_locally(caf::actor_system& sys, const local_serving& serving,
                             std::ostream& err);

/// Local mode: the ranks in this process (a host communicator group, or NCCL between GPUs).
int run_locally(const run_flags& flags, const run_options& options, std::ostream& out,
                std::ostream& err, interrupt_watch* interrupts = nullptr);

/// A cluster's connected nodes and the run configured on them, valid while with_cluster's body
/// runs.
struct cluster_context {
  caf::actor_system& sys;
  guarded_transport& net;
  cluster& nodes;
  const run_configuration& run;
  std::shared_ptr<step_channel_client> channels; // null: steps through the middleman
  std::chrono::milliseconds collective_timeout;
  std::vector<std::string> addresses;
};

/// Connects to flags.nodes, places the ranks there, configures the run on their device and calls
/// `body` (whose result is returned); the ranks stop when it returns. A refusal on the way (a node
/// unreachable, a flag the nodes cannot serve) is the error, and `body` never runs.
expected<int> with_cluster(const run_flags& flags, const run_options& o,
                           const std::function<int(cluster_context&)>& body);

/// The driver of a cluster run: the nodes' ranks, routes and step channels.
driver_setup cluster_driver_setup(const cluster_context& c, const run_options& o,
                                  std::function<void(const run_progress&)> progress,
                                  std::shared_ptr<trace_recorder> recorder);

/// Cluster mode (--nodes): the ranks on `kvactor node` processes; with --restart-policy rebuild
/// a lost rank is waited for and the unfinished requests re-run.
int run_on_cluster(const run_flags& flags, const run_options& options, std::ostream& out,
                   std::ostream& err, interrupt_watch* interrupts = nullptr);

/// Whether rebuilding the group can serve what a run that ended with `e` left: a lost rank, or a
/// collective that failed because a peer went away. Decided on the code, never the message.
bool rebuild_helps(const error& e);

} // namespace kvactor
