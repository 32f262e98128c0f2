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
  std::lock_guard lock(mu_);
  live_.erase(s);
}

std::vector<std::shared_ptr<session>> server_state::close_all() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  std::vector<std::shared_ptr<session>> out;
  out.reserve(live_.size());
  for (auto& [_, weak] : live_)
    if (auto s = weak.lock()) out.push_back(std::move(s));
  return out;
}

} // namespace kvactor::http
