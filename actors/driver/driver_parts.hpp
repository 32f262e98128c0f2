// The driver actor's parts, shared by its files: start.cpp (start-up: the communicator,
// configure, the common block count, allocate), collectives.cpp (gathering the ranks' collective
// ledgers) and actor.cpp (the behaviour and the step loop).
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

} // namespace kvactor::driver_detail
