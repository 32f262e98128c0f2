// One driver's run, as `kvactor run` and a cluster rebuild serve it: start (every rank ready),
// then submit the workload, then run until every request finished or failed.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "messages/errc.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

class interrupt_watch;

/// Why a session ended without a summary, and the exit code it means (start_exit_code while
/// starting, exit 1 later).
struct run_failure {
  int exit_code = 1;
  error err;
};

struct session_result {
  std::optional<run_failure> failure;
  std::vector<rank_ready> ready; // empty when the start failed
  double ready_s = 0;            // seconds from start to every rank ready
  run_summary summary;
  int interrupted = 0; // the signal (SIGINT, SIGTERM) that stopped the run; 0: none did
};

/// The exit code of a run that could not start with `e`: 2 (bad input) when a flag, model or
/// budget is at fault; 1 when the ranks failed (a rank lost, a step or a collective failed).
int start_exit_code(const error& e);

/// Between start and submit (every rank ready): a failure here ends the session.
using on_ready_fn = std::function<std::optional<run_failure>(const std::vector<rank_ready>&)>;

/// Serves `workload` through the driver `drv` (blocking the calling thread). With `interrupts`,
/// its first signal drains the driver: the run ends at once with a summary.
session_result serve(caf::actor_system& sys, const driver_actor& drv,
                     const std::vector<request_spec>& workload, const on_ready_fn& on_ready = {},
                     interrupt_watch* interrupts = nullptr);

} // namespace kvactor
