// `kvactor run`'s chaos testing flags: --chaos SEED:RATE disturbs the messages between the
// driver and its ranks and between each rank and its children, --chaos-kill and --chaos-stall
// stop a rank at a chosen step, and --step-timeout bounds how long the driver waits for a rank's
// answer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "actors/chaos/chaos_link.hpp"
#include "actors/driver/step_deadlines.hpp"
#include "actors/rank/group.hpp"
#include "messages/errc.hpp"

namespace kvactor {

struct chaos_flags {
  std::string chaos;           // "SEED:RATE"; empty: a calm run
  std::string kill;            // "RANK:STEP"; empty: none
  std::string stall;           // "RANK:STEP"; empty: none
  double step_timeout_s = 300; // 0: wait for ever
};

struct chaos_setup {
  std::optional<chaos_spec> chaos;
  std::vector<step_fault> faults;
  step_deadlines deadlines; // retransmit under --chaos
};

/// Checks the flags for `tp` ranks; errors name the flag and the value.
expected<chaos_setup> resolve_chaos_flags(const chaos_flags& flags, int32_t tp);

} // namespace kvactor
