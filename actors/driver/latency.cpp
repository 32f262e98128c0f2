#include "actors/driver/latency.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvactor {

namespace {

double nearest_rank(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

} // namespace

void request_latencies::arrived(uint64_t id, double t_s) {
  requests_[id].arrival = t_s;
}

void request_latencies::token(uint64_t id, double t_s) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  auto& r = it->second;
  if (r.tokens == 0) r.first = t_s;
  r.last = t_s;
  ++r.tokens;
}

request_timing request_latencies::timing(uint64_t id) const {
  request_timing t;
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.tokens == 0) return t;
  const auto& r = it->second;
  t.ttft_s = r.first - r.arrival;
  t.e2e_s = r.last - r.arrival;
  if (r.tokens > 1) t.tpot_s = (r.last - r.first) / static_cast<double>(r.tokens - 1);
  t.tokens = r.tokens;
  return t;
}

void request_latencies::retire(uint64_t id) {
  const auto t = timing(id);
  requests_.erase(id);
  if (t.tokens == 0) return;
  if (retired_.size() < max_retired) {
    retired_.push_back(t);
    return;
  }
  retired_[next_retired_] = t;
  next_retired_ = (next_retired_ + 1) % max_retired;
}

latency_summary request_latencies::summarize() const {
  std::vector<double> ttft, tpot, e2e;
  auto add = [&](const request_timing& t) {
    ttft.push_back(t.ttft_s * 1e3);
    e2e.push_back(t.e2e_s * 1e3);
    if (t.tokens > 1) tpot.push_back(t.tpot_s * 1e3);
  };
  for (const auto& [id, r] : requests_)
    if (r.tokens > 0) add(timing(id));
  for (const auto& t : retired_)
    add(t);
  return {nearest_rank(ttft, 0.5),  nearest_rank(ttft, 0.99), nearest_rank(tpot, 0.5),
          nearest_rank(tpot, 0.99), nearest_rank(e2e, 0.5),   nearest_rank(e2e, 0.99)};
}

} // namespace kvactor
