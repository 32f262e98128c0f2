#include "net/http/server_state.hpp"

#include <utility>

namespace kvactor::http {

server_state::server_state(server_options opts, handler h)
    : options(std::move(opts)), on_request(std::move(h)) {}

admission server_state::enlist(const std::shared_ptr<session>& s) {
  std::lock_guard lock(mu_);
  if (stopping_) return admission::stopping;
  live_.emplace(s.get(), s);
  if (admitted_.load(std::memory_order_relaxed) >= options.max_connections) return admission::full;
  admitted_.fetch_add(1, std::memory_order_relaxed);
  return admission::admitted;
}

void server_state::delist(const session* s) {
  {
    std::lock_guard lock(mu_);
    live_.erase(s);
  }
  gone_.notify_all();
}

std::vector<std::shared_ptr<session>> server_state::close_all() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  return live_sessions();
}

std::vector<std::shared_ptr<session>> server_state::finish_all() {
  std::lock_guard lock(mu_);
  finishing_.store(true, std::memory_order_relaxed);
  return live_sessions();
}

bool server_state::wait_all_gone(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return gone_.wait_until(lock, deadline, [this] { return live_.empty(); });
}

std::vector<std::shared_ptr<session>> server_state::live_sessions() {
  std::vector<std::shared_ptr<session>> out;
  out.reserve(live_.size());
  for (auto& [_, weak] : live_)
    if (auto s = weak.lock()) out.push_back(std::move(s));
  return out;
}

} // namespace kvactor::http
