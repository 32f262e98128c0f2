// SIGINT and SIGTERM during a command that serves work: the first asks it to stop (the caller's
// callback, once, on a thread of this watch's own), a second exits the process at once with
// 128 + the signal. While a watch lives it owns both signals; its end restores what was there.
#pragma once

#include <csignal>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace kvactor {

class interrupt_watch {
public:
  interrupt_watch();
  ~interrupt_watch();
  interrupt_watch(const interrupt_watch&) = delete;
  interrupt_watch& operator=(const interrupt_watch&) = delete;

  /// Who to tell of the first signal: called with its number, at once if it came already.
  void on_interrupt(std::function<void(int)> fn);
  /// The first signal's number; 0 while none came.
  int signal() const;

private:
  void watch();

  int pipe_[2] = {-1, -1};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  mutable std::mutex mutex_;
  std::function<void(int)> fn_;
  int signal_ = 0;
  std::thread thread_;
};

/// "SIGINT", "SIGTERM", else "signal N".
std::string signal_name(int sig);

} // namespace kvactor
