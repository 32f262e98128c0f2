#include "actors/rank/step_answers.hpp"

namespace kvactor {

namespace {

// The cheap fields first: a new step differs in seq or epoch, and only a copy is compared whole.
bool same_step(const step_plan& a, const step_plan& b) {
  return a.seq == b.seq && a.epoch == b.epoch && a == b;
}

} // namespace

step_answers::seen step_answers::classify(const step_plan& plan) const {
  if (in_flight_ != nullptr) return same_step(plan, *in_flight_) ? seen::in_flight : seen::new_step;
  return plan_ && answer_ && same_step(plan, *plan_) ? seen::answered : seen::new_step;
}

void step_answers::begin(const step_plan& plan) {
  in_flight_ = &plan;
  plan_.reset();
  answer_.reset();
}

void step_answers::end(step_plan plan, expected<step_done> answer) {
  in_flight_ = nullptr;
  plan_ = std::move(plan);
  answer_ = std::move(answer);
}

} // namespace kvactor
