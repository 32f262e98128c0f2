// The two ways `kvactor run` serves a workload, each orchestrating the same steps: device,
// configuration (run_config.hpp), ranks, driver, session (run_session.hpp), report
// (run_report.hpp).
#pragma once

#include <ostream>

#include "deploy/run_command.hpp"
#include "deploy/run_options.hpp"

namespace kvactor {

/// Local mode: the ranks in this process (a host communicator group, or NCCL between GPUs).
int run_locally(const run_flags& flags, const run_options& options, std::ostream& out,
                std::ostream& err);

/// Cluster mode (--nodes): the ranks on `kvactor node` processes; with --restart-policy rebuild
/// a lost rank is waited for and the unfinished requests re-run.
int run_on_cluster(const run_flags& flags, const run_options& options, std::ostream& out,
                   std::ostream& err);

/// Whether rebuilding the group can serve what a run that ended with `e` left: a lost rank, or a
/// collective that failed because a peer went away. Decided on the code, never the message.
bool rebuild_helps(const error& e);

} // namespace kvactor
