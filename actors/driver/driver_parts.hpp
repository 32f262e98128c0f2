// The driver actor's parts, shared by its files: actor.cpp (the behaviour, its handlers and the
// end of a run), step_loop.cpp (schedule, deliver through the fabric, gather, apply), start.cpp
// (start-up: the communicator, configure, the common block count, allocate) and collectives.cpp
// (gathering the ranks' collective ledgers).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <caf/make_message.hpp> // before result.hpp: caf::result<T> needs it declared
#include <caf/result.hpp>

#include "actors/driver/actor.hpp"
#include "actors/driver/collective_diagnosis.hpp"

namespace kvactor::driver_detail {

using driver_self = driver_actor::stateful_pointer<driver_state>;

/// The `start` handler: answers with every rank_ready (sorted by rank) or the first error.
caf::result<std::vector<rank_ready>> start_ranks(driver_self self);

/// Asks every rank for its collective ledger, waiting at most `within` for each answer, and
/// calls `then` with every rank's answer (in rank order) once each answered or timed out.
void gather_ledgers(driver_self self, std::chrono::milliseconds within,
                    std::function<void(std::vector<rank_ledger>)> then);

/// Schedules and sends the next step when the driver is idle; ends the run when all is done.
void next_step(driver_self self);

inline bool running(const driver_state& st) {
  return st.phase == driver_phase::idle || st.phase == driver_phase::stepping;
}

/// Calls on_progress, if set, with the progress now.
void report(driver_state& st);
/// Answers every request_await whose request is done.
void deliver_awaited(driver_state& st);
/// After an event (a step applied or rejected, admissions, an abort): tells the outputs sink
/// the step's `sampled` tokens and every request that ended, answers the awaits, and when
/// serving forgets the requests whose end was told.
void settle(driver_state& st, const std::vector<sampled_token>& sampled = {});
/// Fails every request that has not finished (those not yet arrived too), with `why`.
void fail_unfinished(driver_state& st, const std::string& why);
/// The run is over: answers `run` with the summary, and every await.
void finish_run(driver_self self);
/// The run ends now with `err`: the requests of `plan` (if any) fail with `why`, every other
/// unfinished request with `rest`.
void end_run(driver_self self, error err, const step_plan* plan, const std::string& why,
             const std::string& rest);
/// Rank i as the trace names it: "rank[i]".
inline std::string rank_name(int64_t i) {
  return "rank[" + std::to_string(i) + "]";
}

/// Rank r, with its location when it has one ("rank 1 on node 10.0.0.2:7400").
std::string describe_rank(const driver_state& st, int32_t r);

} // namespace kvactor::driver_detail
