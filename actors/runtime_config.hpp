// Scheduler settings for the step pipeline. A step is a short chain of hops (driver -> rank ->
// builders -> rank -> driver). With CAF's defaults an idle worker sleeps up to 10 ms between
// polls, and every hop that lands on a sleeping worker pays that (docs/design.md, "Threads and
// scheduling"). Timed polling is no cure either: a 5 us sleep lasts ~55 us under Linux's default
// timer slack, and polling threads take the CPU from the ones with work (bench/fanout_probe.cpp
// measured both). So a worker spins briefly, then blocks until an enqueue notifies it.
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/timespan.hpp>

#include <chrono>

namespace kvactor {

/// Idle workers spin for a moment, then wait on their condition variable, which an enqueue from
/// outside the scheduler (the network, a detached actor) notifies: a hop costs a wake-up, never a
/// sleep. The 100 us timeout bounds how long a job waits to be stolen from a busy worker's queue.
inline void configure_step_latency(caf::actor_system_config& cfg) {
  using namespace std::chrono_literals;
  cfg.set("work-stealing.aggressive-poll-attempts", 1000);
  cfg.set("work-stealing.moderate-poll-attempts", 0);
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{100us});
}

} // namespace kvactor
