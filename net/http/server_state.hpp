// What the listener and every session of one server share: the options, the handler, the gate
// responders post through, and the register of live sessions that stop() closes. It outlives the
// io_context (sessions leave the register as they are destroyed).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "net/http/responder.hpp"
#include "net/http/server.hpp"

namespace kvactor::http {

class session;

/// Whether a new connection is served.
enum class admission : uint8_t { admitted, full, stopping };

class server_state {
public:
  server_state(server_options options, handler on_request);

  const server_options options;
  const handler on_request;
  const std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();

  /// Registers a new session: admitted while fewer than max_connections are; `full` (register it
  /// anyway, it answers 503 and closes) beyond; `stopping` once close_all() ran.
  admission enlist(const std::shared_ptr<session>& s);
  /// An admitted session closed: it no longer counts.
  void release() { admitted_.fetch_sub(1, std::memory_order_relaxed); }
  /// From the session's destructor.
  void delist(const session* s);
  /// Every live session; refuses all later ones (enlist answers `stopping`).
  std::vector<std::shared_ptr<session>> close_all();
  /// Every live session, and from now on each answer closes its connection once sent.
  std::vector<std::shared_ptr<session>> finish_all();
  /// Whether finish_all() ran: connections close after their answer in progress.
  bool finishing() const { return finishing_.load(std::memory_order_relaxed); }
  /// Waits until no session is left or `deadline` passes; true when none is left.
  bool wait_all_gone(std::chrono::steady_clock::time_point deadline);

  size_t admitted() const { return admitted_.load(std::memory_order_relaxed); }

private:
  std::vector<std::shared_ptr<session>> live_sessions(); // REQUIRES: mu_ held

  std::mutex mu_;
  bool stopping_ = false;                                           // GUARDED_BY(mu_)
  std::unordered_map<const session*, std::weak_ptr<session>> live_; // GUARDED_BY(mu_)
  std::condition_variable gone_;                                    // live_ shrank
  std::atomic<size_t> admitted_{0};
  std::atomic<bool> finishing_{false};
};

} // namespace kvactor::http
