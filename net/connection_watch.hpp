// Keeps connections that have not finished their handshake from piling up: each gets a deadline,
// and when too many wait at once the oldest is cut to admit the newest. A peer that connects and
// says nothing (or half a header) is cut when its deadline passes; a flood of such connections
// cannot lock out a legitimate peer, whose handshake takes milliseconds. Cutting is a
// shutdown(2) on the socket: its owner (CAF's multiplexer) then reads end-of-file and closes it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace kvactor {

struct watch_limits {
  std::chrono::milliseconds handshake_timeout{10'000};
  /// Accepted connections that may wait for their handshake at once.
  size_t max_pending = 64;
};

struct watch_counts {
  uint64_t admitted = 0;
  uint64_t established = 0;
  uint64_t timed_out = 0; // cut at their deadline
  uint64_t evicted = 0;   // cut to make room for a newer connection
};

class connection_watch {
public:
  using clock = std::chrono::steady_clock;
  using ticket = uint64_t;

  /// `on_cut(fd, why)` is told of every cut (for the log); it runs under the watch's lock and
  /// must not call back into the watch.
  explicit connection_watch(watch_limits limits,
                            std::function<void(int fd, const char* why)> on_cut = {});
  ~connection_watch();
  connection_watch(const connection_watch&) = delete;
  connection_watch& operator=(const connection_watch&) = delete;

  /// Starts the thread that cuts overdue connections (tests call expire() themselves instead).
  void start();

  /// A new connection on `fd`. `capped`: it counts against max_pending (accepted ones do; our own
  /// outgoing connections only get the deadline).
  ticket admit(int fd, bool capped, clock::time_point now = clock::now());
  /// It proved who it is (the cookie proof): it keeps its deadline but no stranger can evict it.
  void proven(ticket t);
  /// Its handshake is through: no deadline any more.
  void established(ticket t);
  /// Its socket is about to be closed: the watch must not touch the descriptor again.
  void forget(ticket t);
  /// Cuts every connection whose deadline is before `now`; returns how many.
  size_t expire(clock::time_point now = clock::now());

  size_t pending() const;
  watch_counts counts() const;

private:
  struct waiting {
    int fd;
    bool capped;
    clock::time_point deadline;
  };
  void cut(std::map<ticket, waiting>::iterator it, const char* why);
  void evict_oldest_capped();
  void run();

  watch_limits limits_;
  std::function<void(int, const char*)> on_cut_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<ticket, waiting> waiting_; // ticket order is admission order
  ticket next_ = 1;
  size_t capped_ = 0;
  watch_counts counts_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace kvactor
