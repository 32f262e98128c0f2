// `kvactor run`: check the flags, then serve the workload locally or on a cluster's nodes.
#include "deploy/run_command.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "deploy/cli.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/run_options.hpp"

namespace kvactor {

int run_command(const run_flags& flags, std::ostream& out, std::ostream& err) {
  auto options = check_run_flags(flags);
  if (!options) {
    fmt::print(err, "kvactor run: error: {}\n", options.err().message);
    return exit_bad_input;
  }
  return options->cluster ? run_on_cluster(flags, *options, out, err)
                          : run_locally(flags, *options, out, err);
}

} // namespace kvactor
