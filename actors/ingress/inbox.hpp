// What the HTTP threads hand the ingress actor, in arrival order: calls of the generation
// endpoints and clients that went away. The threads must not block on the actor, and a message
// per call would flood its mailbox under load: they queue here and wake the actor only when the
// queue was empty (pure: no CAF).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "actors/ingress/ingress_core.hpp"

namespace kvactor {

struct ingress_call {
  openai::endpoint kind = openai::endpoint::completions;
  std::string body;
  std::shared_ptr<openai::client> to;
};

struct ingress_disconnect {
  std::shared_ptr<openai::client> from;
};

using ingress_entry = std::variant<ingress_call, ingress_disconnect>;

class ingress_inbox {
public:
  /// Queues `e`; true when the queue was empty, so that the caller wakes the actor.
  bool push(ingress_entry e) {
    std::lock_guard lock(mu_);
    entries_.push_back(std::move(e));
    return entries_.size() == 1;
  }

  /// Everything queued, oldest first.
  std::vector<ingress_entry> take_all() {
    std::lock_guard lock(mu_);
    return std::exchange(entries_, {});
  }

private:
  std::mutex mu_;
  std::vector<ingress_entry> entries_;
};

} // namespace kvactor
