#include "actors/driver/arrival_queue.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvactor {

namespace {

bool by_arrival(const request_spec& a, const request_spec& b) {
  return a.arrival_ns < b.arrival_ns;
}

} // namespace

expected<int64_t> arrival_queue::submit(std::vector<request_spec> specs, int64_t now_ns) {
  std::unordered_set<uint64_t> fresh;
  for (const auto& s : specs)
    if (ids_.count(s.request_id) != 0 || !fresh.insert(s.request_id).second)
      return make_error(errc::invalid_argument,
                        fmt::format("submit: request_id {} is submitted twice", s.request_id));
  ids_.insert(fresh.begin(), fresh.end());
  submitted_ += static_cast<int64_t>(fresh.size());
  const bool in_order = std::is_sorted(specs.begin(), specs.end(), by_arrival);
  for (auto& s : specs) {
    s.arrival_ns = std::max(s.arrival_ns, now_ns);
    pending_.push_back(std::move(s));
  }
  // Live submissions arrive now, after everything queued: sorting is needed only otherwise.
  if (!in_order || !std::is_sorted(pending_.begin(), pending_.end(), by_arrival))
    std::stable_sort(pending_.begin(), pending_.end(), by_arrival);
  return size();
}

void arrival_queue::admit_due(int64_t now_ns, scheduler& sched, request_latencies& latencies) {
  while (!pending_.empty() && pending_.front().arrival_ns <= now_ns) {
    auto r = std::move(pending_.front());
    pending_.pop_front();
    latencies.arrived(r.request_id, static_cast<double>(r.arrival_ns) / 1e9);
    if (auto ok = sched.add_request(r.request_id, std::move(r.prompt), r.max_output_tokens,
                                    std::move(r.sampling));
        !ok)
      spdlog::warn("driver: request {} failed at admission: {}", r.request_id, ok.err().message);
  }
}

void arrival_queue::admit_all(scheduler& sched) {
  for (auto& r : pending_)
    (void)sched.add_request(r.request_id, std::move(r.prompt), r.max_output_tokens,
                            std::move(r.sampling));
  pending_.clear();
}

bool arrival_queue::admit_now(uint64_t request_id, scheduler& sched) {
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](const auto& s) { return s.request_id == request_id; });
  if (it == pending_.end()) return false;
  auto r = std::move(*it);
  pending_.erase(it);
  (void)sched.add_request(r.request_id, std::move(r.prompt), r.max_output_tokens,
                          std::move(r.sampling));
  return true;
}

std::optional<int64_t> arrival_queue::next_arrival_ns() const {
  if (pending_.empty()) return std::nullopt;
  return pending_.front().arrival_ns;
}

} // namespace kvactor
