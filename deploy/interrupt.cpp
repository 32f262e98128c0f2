#include "deploy/interrupt.hpp"

#include <atomic>

#include <fcntl.h>
#include <unistd.h>

namespace kvactor {

namespace {

// The handler may only touch these (async-signal-safe): one watch at a time owns them.
std::atomic<int> signal_pipe{-1};
std::atomic<int> signals_seen{0};

extern "C" void on_stop_signal(int sig) {
  if (signals_seen.fetch_add(1) > 0) _exit(128 + sig); // the second: at once
  const int fd = signal_pipe.load();
  const auto byte = static_cast<unsigned char>(sig);
  if (fd >= 0) (void)!write(fd, &byte, 1);
}

} // namespace

interrupt_watch::interrupt_watch() {
  if (pipe2(pipe_, O_CLOEXEC) != 0) return; // no watch: the signals keep their default action
  signals_seen = 0;
  signal_pipe = pipe_[1];
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  thread_ = std::thread([this] { watch(); });
}

interrupt_watch::~interrupt_watch() {
  if (pipe_[0] < 0) return;
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  signal_pipe = -1;
  const unsigned char stop = 0;
  (void)!write(pipe_[1], &stop, 1);
  thread_.join();
  close(pipe_[0]);
  close(pipe_[1]);
}

void interrupt_watch::watch() {
  unsigned char sig = 0;
  while (read(pipe_[0], &sig, 1) == 1 && sig != 0) {
    std::function<void(int)> fn;
    {
      std::lock_guard lock{mutex_};
      if (signal_ != 0) continue;
      signal_ = sig;
      fn = fn_;
    }
    if (fn) fn(sig);
  }
}

void interrupt_watch::on_interrupt(std::function<void(int)> fn) {
  int sig = 0;
  {
    std::lock_guard lock{mutex_};
    fn_ = fn;
    sig = signal_;
  }
  if (sig != 0 && fn) fn(sig);
}

int interrupt_watch::signal() const {
  std::lock_guard lock{mutex_};
  return signal_;
}

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

} // namespace kvactor
