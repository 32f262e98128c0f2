// `kvactor replay FILE --actor driver`: the real driver against ranks stubbed from the trace.
#pragma once

#include <ostream>

#include "deploy/recorded_run.hpp"
#include "deploy/replay_command.hpp"

namespace kvactor {

/// The driver re-runs the recorded workload; each stub rank checks every message the driver
/// sends against the recording and answers with the recorded reply. With flags.verify, the
/// first difference (a field of a rank_config, an allocate, a step_plan, or the run summary) is
/// reported and the exit code is 1.
int replay_driver(const replay_flags& flags, const recorded_run& run, std::ostream& out,
                  std::ostream& err);

} // namespace kvactor
