// How long the driver waits for a rank's answer to a step (pure: no CAF). A rank that has not
// answered by the step timeout is declared silent and the run ends naming it, so that no run
// waits forever for a hung rank (vLLM's multiprocess executor gives a step 300 s the same way).
// Under --chaos the link may lose a step or its answer, so the driver also re-sends the step to
// every rank that has not answered; ranks answer a step they have seen again from memory.
#pragma once

#include <chrono>
#include <vector>

namespace kvactor {

struct step_deadlines {
  std::chrono::milliseconds step_timeout{300'000}; // 0: wait forever
  bool retransmit = false;                         // --chaos: re-send to ranks not answered yet
  std::chrono::milliseconds resend_floor{20};
  std::chrono::milliseconds resend_ceiling{2'000};

  /// When to re-send: four times the median of the last 16 steps' times (a slow step is not
  /// re-sent at once), within [resend_floor, resend_ceiling].
  std::chrono::milliseconds resend_after(const std::vector<double>& step_ms) const;

  /// Cluster mode: how long a node relaying a step waits for its ranks before it reports the
  /// silent ones (0: as long as it takes). Nine tenths of the step timeout, so that the driver
  /// names the silent rank itself, not every rank of its node, when its own timeout comes.
  std::chrono::milliseconds relay_answer_within() const { return step_timeout * 9 / 10; }
};

} // namespace kvactor
