// What a rank answers a step it has seen before (pure: no CAF). The driver re-sends a step to a
// rank that has not answered (a lost message under --chaos), and a link may deliver one twice:
// the same step_plan again gets the answer the first copy got, computed once. A copy that
// arrives while the step is still in flight waits for that answer. Anything else under a used
// sequence number is left to step_state's validation, which rejects it unchanged.
#pragma once

#include <optional>

#include "messages/errc.hpp"
#include "messages/step.hpp"

namespace kvactor {

class step_answers {
public:
  enum class seen : uint8_t {
    new_step,  // not the last step: validate and run it
    in_flight, // the step in flight, again: answer it when that step ends
    answered,  // the last step, answered: answer it again with last()
  };

  seen classify(const step_plan& plan) const;

  /// `plan` was applied and is in flight. Not copied (a step's hot path): `plan` must live until
  /// end().
  void begin(const step_plan& plan);
  /// The step in flight ended with `answer`; both are kept for a copy that comes later.
  void end(step_plan plan, expected<step_done> answer);

  /// REQUIRES: classify() returned answered.
  const expected<step_done>& last() const { return *answer_; }

private:
  const step_plan* in_flight_ = nullptr;
  std::optional<step_plan> plan_; // the last step answered
  std::optional<expected<step_done>> answer_;
};

} // namespace kvactor
