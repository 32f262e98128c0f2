// Scheduler settings for the step pipeline. A step is a short chain of hops (driver -> rank ->
// builders -> rank -> driver); with CAF's defaults an idle worker sleeps up to 10 ms between
// polls, and every hop that lands on a sleeping worker pays that (docs/design.md, "Threads and
// scheduling").
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/timespan.hpp>

#include <chrono>

namespace kvactor {

/// Keeps idle workers polling briefly and never sleeping long, so a hop costs microseconds.
inline void configure_step_latency(caf::actor_system_config& cfg) {
  using namespace std::chrono_literals;
  cfg.set("work-stealing.aggressive-poll-attempts", 1000);
  cfg.set("work-stealing.moderate-poll-attempts", 1000);
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{5us});
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{100us});
}

} // namespace kvactor
