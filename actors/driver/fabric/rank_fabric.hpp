// The rank fabric: how a step plan reaches the ranks and how each rank's answer comes back. The
// driver hands a step to its fabric and hears, rank by rank, step_done or a failure; it never
// knows whether the ranks run in this process (local_fabric), behind node processes (node_fabric)
// with a step channel beside the middleman (channel_fabric), or behind --chaos links
// (chaos_fabric, a wrapper around any other). One deadline rule covers every fabric: deliver()
// re-sends to silent ranks when asked to and gives up on them at the step timeout. vLLM's
// Executor has the same shape: one collective_rpc over in-process, multiprocess or Ray workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <caf/message.hpp>

#include "actors/chaos/chaos_link.hpp"
#include "actors/driver/step_deadlines.hpp"
#include "actors/interfaces.hpp"

namespace kvactor {

/// One step plan on its way to the ranks, and where their answers go: the driver's step in
/// flight implements it.
class step_delivery : public std::enable_shared_from_this<step_delivery> {
public:
  using clock_type = std::chrono::steady_clock;
  explicit step_delivery(step_plan plan);
  step_delivery(const step_delivery&) = delete; // plan() refers into message()
  step_delivery& operator=(const step_delivery&) = delete;
  virtual ~step_delivery() = default;

  /// The plan as one message every in-process rank shares (request_shared): never copied.
  const caf::message& message() const { return message_; }
  const step_plan& plan() const { return plan_; }
  /// When the plan was first sent (the step timeout counts from here).
  clock_type::time_point sent() const { return sent_; }

  /// Rank `rank` executed the step.
  virtual void on_done(int32_t rank, step_done done) = 0;
  /// Rank `rank` failed the step (request_ids: the requests it names, maybe none).
  virtual void on_failure(int32_t rank, error err, std::vector<uint64_t> request_ids) = 0;
  /// Nothing more is wanted of this step: no re-send, no deadline.
  virtual bool settled() const = 0;
  /// The ranks that have not answered, in rank order.
  virtual std::vector<int32_t> silent() const = 0;
  /// The step timeout passed with silent() ranks.
  virtual void on_deadline() = 0;

protected:
  /// A delivery of the same message (a wrapper's stand-in for another delivery).
  explicit step_delivery(const step_delivery& other, int);

private:
  caf::message message_;
  const step_plan& plan_;
  clock_type::time_point sent_;
};

using delivery_ptr = std::shared_ptr<step_delivery>;

/// What a fabric needs of the actor it works for: requests and timers on that actor's thread.
class fabric_host {
public:
  virtual ~fabric_host() = default;
  virtual void request_step(const rank_actor& rank, const caf::message& plan,
                            std::function<void(step_done&)> done,
                            std::function<void(caf::error&)> failed) = 0;
  virtual void request_node_step(const node_actor& node, node_step step,
                                 std::function<void(node_step_done&)> done,
                                 std::function<void(caf::error&)> failed) = 0;
  /// Runs `fn` on the actor's thread after `delay`.
  virtual void after(std::chrono::microseconds delay, std::function<void()> fn) = 0;
};

class rank_fabric {
public:
  rank_fabric(fabric_host& host, size_t num_ranks, step_deadlines deadlines);
  rank_fabric(const rank_fabric&) = delete;
  rank_fabric& operator=(const rank_fabric&) = delete;
  virtual ~rank_fabric() = default;

  size_t num_ranks() const { return num_ranks_; }
  /// Sends `d` to every rank and watches it until it settles: with retransmit on, the plan goes
  /// again to every silent rank after deadlines.resend_after(recent_step_ms); at the step timeout
  /// d.on_deadline() is called if ranks are still silent.
  void deliver(const delivery_ptr& d, const std::vector<double>& recent_step_ms);
  /// Copies of steps re-sent to ranks that had not answered.
  int64_t steps_resent() const { return steps_resent_; }

  /// Sends `d`'s plan to every rank.
  virtual void send(const delivery_ptr& d) = 0;
  /// Sends `d`'s plan again to rank `rank` alone.
  virtual void resend(const delivery_ptr& d, int32_t rank) = 0;
  /// An event of a node's step channel (channel_fabric; the others have none).
  virtual void on_channel_event(node_channel_event& e) { (void)e; }
  /// What the links did to the messages (chaos_fabric; the others disturb none).
  virtual link_counts faults() const { return {}; }

protected:
  const step_deadlines& deadlines() const { return deadlines_; }
  fabric_host& host_;

private:
  void arm_watchdog(step_delivery::clock_type::time_point deadline);
  void resend_unanswered(const delivery_ptr& d, std::chrono::milliseconds every);

  size_t num_ranks_;
  step_deadlines deadlines_;
  std::weak_ptr<step_delivery> current_;
  bool watchdog_armed_ = false; // one pending check at a time
  int64_t steps_resent_ = 0;
};

} // namespace kvactor
