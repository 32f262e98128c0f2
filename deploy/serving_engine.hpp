// The engine `kvactor serve` and `kvactor batch` put their ingress in front of: the ranks in this
// process (local mode), or on `kvactor node` processes (--nodes), with a driver here that serves
// whatever is submitted until it is drained. The front is spawned in the engine's actor system
// once the run is configured (so that it knows the model's length) and becomes the driver's
// output sink.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "deploy/run_config.hpp"
#include "deploy/run_options.hpp"
#include "deploy/run_session.hpp"

namespace kvactor {

class interrupt_watch;
struct served_metrics;

struct engine_hooks {
  /// The run is configured and the actor system made: spawn the front there (its output sink).
  std::function<expected<output_sink_actor>(caf::actor_system&, const run_configuration&)>
      on_system;
  /// Every rank is ready.
  std::function<std::optional<run_failure>(const driver_actor&, const std::vector<rank_ready>&)>
      on_ready;
  /// The engine stopped; the actor system still runs (the front's last answers go out here).
  std::function<void(caf::actor_system&)> on_end;
  interrupt_watch* interrupts = nullptr; // the first signal drains the engine (until on_ready
                                         // installs the front's own handling)
  const served_metrics* metrics = nullptr;
};

/// Local ranks, or with options.cluster the nodes of flags.nodes; serves until drained.
session_result serve_engine(const run_flags& flags, const run_options& options, engine_hooks& hooks,
                            std::ostream& err);

} // namespace kvactor
