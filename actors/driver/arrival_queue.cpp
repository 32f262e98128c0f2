#include "actors/driver/arrival_queue.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvactor {

expected<int64_t> arrival_queue::submit(std::vector<request_spec> specs, int64_t now_ns) {
  std::set<uint64_t> ids;
  for (const auto& s : pending_)
    ids.insert(s.request_id);
  for (const auto& s : specs)
    if (!ids.insert(s.request_id).second)
      return make_error(errc::invalid_argument,
                        fmt::format("submit: request_id {} is submitted twice", s.request_id));
  for (auto& s : specs) {
    s.arrival_ns = std::max(s.arrival_ns, now_ns);
    pending_.push_back(std::move(s));
  }
  // Only the tail not yet admitted is reordered.
  std::stable_sort(pending_.begin() + static_cast<std::ptrdiff_t>(next_), pending_.end(),
                   [](const auto& a, const auto& b) { return a.arrival_ns < b.arrival_ns; });
  return size();
}

void arrival_queue::admit_due(int64_t now_ns, scheduler& sched, request_latencies& latencies) {
  while (next_ < pending_.size() && pending_[next_].arrival_ns <= now_ns) {
    auto& r = pending_[next_++];
    latencies.arrived(r.request_id, static_cast<double>(r.arrival_ns) / 1e9);
    if (auto ok = sched.add_request(r.request_id, r.prompt, r.max_output_tokens, r.sampling); !ok)
      spdlog::warn("driver: request {} failed at admission: {}", r.request_id, ok.err().message);
  }
}

void arrival_queue::admit_all(scheduler& sched) {
  while (next_ < pending_.size()) {
    auto& r = pending_[next_++];
    (void)sched.add_request(r.request_id, r.prompt, r.max_output_tokens, r.sampling);
  }
}

std::optional<int64_t> arrival_queue::next_arrival_ns() const {
  if (next_ >= pending_.size()) return std::nullopt;
  return pending_[next_].arrival_ns;
}

bool arrival_queue::submitted(uint64_t request_id) const {
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const auto& s) { return s.request_id == request_id; });
}

} // namespace kvactor
