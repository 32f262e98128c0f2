// `kvactor run`: check the flags, then serve the workload locally or on a cluster's nodes.
#include "deploy/run_command.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "actors/step_timeline.hpp"
#include "deploy/cli.hpp"
#include "deploy/interrupt.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/run_options.hpp"

namespace kvactor {

int run_command(const run_flags& flags, std::ostream& out, std::ostream& err) {
  auto options = check_run_flags(flags);
  if (!options) {
    fmt::print(err, "kvactor run: error: {}\n", options.err().message);
    return exit_bad_input;
  }
  const bool timed = !flags.debug_step_times.empty();
  if (timed) {
    step_timeline::enable("driver", flags.debug_step_times);
    step_timeline::note("run"); // a file may gather several runs: each starts with this line
  }
  interrupt_watch interrupts; // from here on, SIGINT and SIGTERM drain the run
  const int code = options->cluster ? run_on_cluster(flags, *options, out, err, &interrupts)
                                    : run_locally(flags, *options, out, err, &interrupts);
  if (timed) {
    if (auto written = step_timeline::flush(); !written)
      fmt::print(err, "kvactor run: warning: {}\n", written.err().message);
    step_timeline::disable(); // a later run in this process marks only if it asks to
  }
  return code;
}

} // namespace kvactor
