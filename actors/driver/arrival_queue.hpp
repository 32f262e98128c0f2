// The requests submitted to a run, queued by arrival time until the scheduler admits them
// (pure: no CAF). The run's own workload arrives at its offsets; a request submitted during the
// run (injection) cannot arrive in the past, so it arrives now.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_set>
#include <vector>

#include "actors/driver/latency.hpp"
#include "actors/driver/scheduler.hpp"
#include "messages/request.hpp"

namespace kvactor {

class arrival_queue {
public:
  /// Queues `specs` (none arrives before `now_ns`), refusing all of them if one's request_id was
  /// submitted before or twice. Returns the number of requests submitted so far.
  expected<int64_t> submit(std::vector<request_spec> specs, int64_t now_ns);
  /// Hands the scheduler every request due by `now_ns`; the latencies count from each one's
  /// arrival. A request the scheduler refuses is failed there, named, and reported.
  void admit_due(int64_t now_ns, scheduler& sched, request_latencies& latencies);
  /// Hands the scheduler every request not yet admitted, due or not (to fail them).
  void admit_all(scheduler& sched);
  /// Hands the scheduler one request now, due or not (to abort it); false if it is not waiting
  /// here.
  bool admit_now(uint64_t request_id, scheduler& sched);
  /// When the next request not yet admitted arrives; none: every one was admitted.
  std::optional<int64_t> next_arrival_ns() const;
  bool submitted(uint64_t request_id) const { return ids_.count(request_id) != 0; }
  /// Requests submitted so far (forgotten ones included).
  int64_t size() const { return submitted_; }
  /// A serving driver is done with the request: its id is no longer kept (a long-lived server
  /// would otherwise keep every id it ever served).
  void forget(uint64_t request_id) { ids_.erase(request_id); }

private:
  // Requests not yet admitted, by arrival; an admitted request leaves (a server admits many).
  std::deque<request_spec> pending_;
  std::unordered_set<uint64_t> ids_; // every id submitted and not forgotten (never reused)
  int64_t submitted_ = 0;
};

} // namespace kvactor
