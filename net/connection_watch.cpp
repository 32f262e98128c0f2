#include "net/connection_watch.hpp"

#include <sys/socket.h>

namespace kvactor {

connection_watch::connection_watch(watch_limits limits,
                                   std::function<void(int fd, const char* why)> on_cut)
    : limits_(limits), on_cut_(std::move(on_cut)) {}

connection_watch::~connection_watch() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void connection_watch::start() {
  thread_ = std::thread([this] { run(); });
}

connection_watch::ticket connection_watch::admit(int fd, bool capped, clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (capped && capped_ >= limits_.max_pending) evict_oldest_capped();
  const ticket t = next_++;
  waiting_.emplace(t, waiting{fd, capped, now + limits_.handshake_timeout});
  if (capped) ++capped_;
  ++counts_.admitted;
  return t;
}

void connection_watch::proven(ticket t) {
  std::lock_guard lock(mutex_);
  auto it = waiting_.find(t);
  if (it == waiting_.end() || !it->second.capped) return;
  it->second.capped = false;
  --capped_;
}

void connection_watch::established(ticket t) {
  std::lock_guard lock(mutex_);
  auto it = waiting_.find(t);
  if (it == waiting_.end()) return;
  if (it->second.capped) --capped_;
  waiting_.erase(it);
  ++counts_.established;
}

void connection_watch::forget(ticket t) {
  std::lock_guard lock(mutex_);
  auto it = waiting_.find(t);
  if (it == waiting_.end()) return;
  if (it->second.capped) --capped_;
  waiting_.erase(it);
}

size_t connection_watch::expire(clock::time_point now) {
  std::lock_guard lock(mutex_);
  size_t cut_now = 0;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto next = std::next(it);
    if (it->second.deadline <= now) {
      cut(it, "no handshake before its deadline");
      ++counts_.timed_out;
      ++cut_now;
    }
    it = next;
  }
  return cut_now;
}

size_t connection_watch::pending() const {
  std::lock_guard lock(mutex_);
  return waiting_.size();
}

watch_counts connection_watch::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

// The descriptor is still open: its owner calls forget() (under this lock) before closing it.
void connection_watch::cut(std::map<ticket, waiting>::iterator it, const char* why) {
  if (on_cut_) on_cut_(it->second.fd, why); // first: the peer's address is still known
  ::shutdown(it->second.fd, SHUT_RDWR);
  if (it->second.capped) --capped_;
  waiting_.erase(it);
}

void connection_watch::evict_oldest_capped() {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
    if (it->second.capped) {
      cut(it, "evicted: too many connections waiting for their handshake");
      ++counts_.evicted;
      return;
    }
}

void connection_watch::run() {
  const auto period = std::max(std::chrono::milliseconds(10), limits_.handshake_timeout / 4);
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, period);
    if (stop_) break;
    lock.unlock();
    expire();
    lock.lock();
  }
}

} // namespace kvactor
