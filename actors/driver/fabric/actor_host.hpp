// The fabric_host of an event-based actor: requests from it, and timers that come back to it as
// (atom::timer, id) messages its behaviour hands to fire(). The driver is one; a test may host a
// fabric in any event-based actor the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>

#include <caf/actor_cast.hpp>

#include "actors/driver/fabric/rank_fabric.hpp"
#include "actors/shared_request.hpp"

namespace kvactor {

/// Functions due later, by id (pure: the actor sends itself the id).
class timer_table {
public:
  uint64_t add(std::function<void()> fn) {
    const auto id = ++next_;
    due_.emplace(id, std::move(fn));
    return id;
  }
  /// Runs and forgets timer `id`; an unknown id (injected, or already run) does nothing.
  void fire(uint64_t id) {
    auto it = due_.find(id);
    if (it == due_.end()) return;
    auto fn = std::move(it->second);
    due_.erase(it);
    fn();
  }

private:
  std::map<uint64_t, std::function<void()>> due_;
  uint64_t next_ = 0;
};

template <class Self>
class actor_host final : public fabric_host {
public:
  explicit actor_host(Self* self) : self_(self) {}

  void request_step(const rank_actor& rank, const caf::message& plan,
                    std::function<void(step_done&)> done,
                    std::function<void(caf::error&)> failed) override {
    request_shared<step_plan>(self_, rank, plan).then(std::move(done), std::move(failed));
  }

  void request_node_step(const node_actor& node, node_step step,
                         std::function<void(node_step_done&)> done,
                         std::function<void(caf::error&)> failed) override {
    self_->request(node, caf::infinite, std::move(step)).then(std::move(done), std::move(failed));
  }

  void after(std::chrono::microseconds delay, std::function<void()> fn) override {
    self_->delayed_send(self_, delay, atom::timer_v, timers_.add(std::move(fn)));
  }

  /// The behaviour's (atom::timer, id) handler.
  void fire(uint64_t id) { timers_.fire(id); }

private:
  Self* self_;
  timer_table timers_;
};

} // namespace kvactor
