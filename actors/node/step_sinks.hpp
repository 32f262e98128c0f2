// Where a node writes the answer to a step that came on a step channel (cluster mode). The
// channel's sockets live in net; the node actor sees only this interface, and answers
// from its own thread the moment the last rank has answered: the channel's thread, which took the
// step off the socket, does not have to wake up again to send the answer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "messages/errc.hpp"
#include "messages/node.hpp"

namespace kvactor {

class step_answer_sink {
public:
  virtual ~step_answer_sink() = default;
  /// The gathered answer to a step.
  virtual void answer(const node_step_done& done) = 0;
  /// The node refused step `seq` as a whole (a slot without a rank, a plan that does not decode).
  virtual void refuse(uint64_t seq, const error& why) = 0;
};

/// The sinks of a node's open channels, by id: added and removed by the channels' threads, looked
/// up by the node actor. A sink whose channel closed is gone (its answer is dropped: the driver
/// sends the step again through the middleman).
class step_sinks {
public:
  uint64_t add(std::shared_ptr<step_answer_sink> sink) {
    std::lock_guard<std::mutex> lock(mu_);
    sinks_[++last_] = std::move(sink);
    return last_;
  }
  void remove(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    sinks_.erase(id);
  }
  std::shared_ptr<step_answer_sink> find(uint64_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sinks_.find(id);
    return it == sinks_.end() ? nullptr : it->second;
  }

private:
  mutable std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<step_answer_sink>> sinks_;
  uint64_t last_ = 0;
};

} // namespace kvactor
