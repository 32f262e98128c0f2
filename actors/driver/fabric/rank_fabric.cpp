#include "actors/driver/fabric/rank_fabric.hpp"

#include <algorithm>

#include <caf/make_message.hpp>

namespace kvactor {

step_delivery::step_delivery(step_plan plan)
    : message_(caf::make_message(std::move(plan))), plan_(message_.get_as<step_plan>(0)),
      sent_(clock_type::now()) {}

step_delivery::step_delivery(const step_delivery& other, int)
    : message_(other.message_), plan_(message_.get_as<step_plan>(0)), sent_(other.sent_) {}

rank_fabric::rank_fabric(fabric_host& host, size_t num_ranks, step_deadlines deadlines)
    : host_(host), num_ranks_(num_ranks), deadlines_(deadlines) {}

void rank_fabric::deliver(const delivery_ptr& d, const std::vector<double>& recent_step_ms) {
  current_ = d;
  send(d);
  if (deadlines_.step_timeout.count() > 0) arm_watchdog(d->sent() + deadlines_.step_timeout);
  if (deadlines_.retransmit) resend_unanswered(d, deadlines_.resend_after(recent_step_ms));
}

// At the deadline of the step then in flight it gives up on its silent ranks, or waits for that
// step's own deadline (a later step's, sent since).
void rank_fabric::arm_watchdog(step_delivery::clock_type::time_point deadline) {
  if (watchdog_armed_) return;
  watchdog_armed_ = true;
  const auto wait =
      std::max(deadline - step_delivery::clock_type::now(), step_delivery::clock_type::duration{});
  host_.after(std::chrono::duration_cast<std::chrono::microseconds>(wait), [this] {
    watchdog_armed_ = false;
    auto d = current_.lock();
    if (!d || d->settled()) return; // the next step arms it again
    const auto due = d->sent() + deadlines_.step_timeout;
    if (step_delivery::clock_type::now() >= due)
      d->on_deadline();
    else
      arm_watchdog(due);
  });
}

void rank_fabric::resend_unanswered(const delivery_ptr& d, std::chrono::milliseconds every) {
  host_.after(every, [this, d, every] {
    if (d->settled()) return;
    for (auto r : d->silent()) {
      ++steps_resent_;
      resend(d, r);
    }
    resend_unanswered(d, every);
  });
}

} // namespace kvactor
