#include "actors/node/relay_watch.hpp"

#include <algorithm>
#include <utility>

namespace kvactor {

void relay_watch::add(clock::time_point deadline, std::shared_ptr<step_relay> relay, done_fn done) {
  forget_answered_front();
  watched_.push_back({deadline, std::move(relay), std::move(done)});
}

void relay_watch::expire(clock::time_point now) {
  std::deque<entry> due;
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (it->relay->taken() || it->deadline <= now) {
      if (!it->relay->taken()) due.push_back(std::move(*it));
      it = watched_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& e : due)
    if (e.relay->silence_the_rest()) e.done(e.relay->take());
}

std::optional<relay_watch::clock::time_point> relay_watch::next() const {
  std::optional<clock::time_point> earliest;
  for (const auto& e : watched_)
    if (!e.relay->taken() && (!earliest || e.deadline < *earliest)) earliest = e.deadline;
  return earliest;
}

// Steps are answered in about the order they came: the answered ones at the front go at once, so
// the watch holds the few steps in flight, not every step of the deadline's span.
void relay_watch::forget_answered_front() {
  while (!watched_.empty() && watched_.front().relay->taken())
    watched_.pop_front();
}

} // namespace kvactor
