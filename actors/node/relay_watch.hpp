// The relayed steps a node waits on, by deadline (pure: no CAF). One watchdog per node replaces a
// timed request per rank and step: arming a timer hands it to CAF's clock thread, which cost ~7 us
// of every relay on the critical path (bench/RESULTS.md, "the step timeline"). The actor arms one
// timer for the earliest deadline and calls expire() when it fires; answered relays leave the
// watch as soon as they are older than every relay still waiting.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "actors/node/step_relay.hpp"

namespace kvactor {

class relay_watch {
public:
  using clock = std::chrono::steady_clock;
  using done_fn = std::function<void(node_step_done)>;

  /// Watches `relay` until `deadline`; `done` gets its answer if the deadline makes it due.
  void add(clock::time_point deadline, std::shared_ptr<step_relay> relay, done_fn done);
  /// At `now`: every relay past its deadline reports its unanswered ranks silent and, if that
  /// makes its answer due, gives it to its `done`. Answered relays are forgotten.
  void expire(clock::time_point now);
  /// The earliest deadline of a relay still waiting, if any.
  std::optional<clock::time_point> next() const;
  /// Relays watched (answered ones included until they are forgotten).
  size_t size() const { return watched_.size(); }

private:
  struct entry {
    clock::time_point deadline;
    std::shared_ptr<step_relay> relay;
    done_fn done;
  };
  void forget_answered_front();

  std::deque<entry> watched_; // in the order added
};

} // namespace kvactor
