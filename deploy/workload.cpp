#include "deploy/workload.hpp"

#include <cmath>
#include <set>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "actors/driver/block_pool.hpp"

namespace kvactor {

namespace {

// splitmix64: a small, portable generator, so that a seed means the same workload everywhere.
struct rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int32_t uniform(int32_t lo, int32_t hi) { // [lo, hi]
    return lo + static_cast<int32_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

} // namespace

expected<std::pair<int32_t, int32_t>> parse_range(const std::string& text, const char* flag) {
  auto parse = [&](const std::string& s) -> expected<int32_t> {
    try {
      size_t used = 0;
      long v = std::stol(s, &used);
      if (used != s.size() || v <= 0 || v > max_tokens_per_request) throw std::invalid_argument(s);
      return static_cast<int32_t>(v);
    } catch (const std::exception&) {
      return make_error(errc::invalid_argument,
                        fmt::format("{}: '{}' is not a token count in [1, {}] (N or MIN:MAX)", flag,
                                    text, max_tokens_per_request));
    }
  };
  auto colon = text.find(':');
  auto lo = parse(text.substr(0, colon));
  if (!lo) return lo.err();
  if (colon == std::string::npos) return std::pair{*lo, *lo};
  auto hi = parse(text.substr(colon + 1));
  if (!hi) return hi.err();
  if (*hi < *lo)
    return make_error(errc::invalid_argument,
                      fmt::format("{}: '{}' has MIN above MAX", flag, text));
  return std::pair{*lo, *hi};
}

expected<double> parse_arrival_rate(const std::string& text) {
  if (text == "inf") return 0.0;
  try {
    size_t used = 0;
    const double rate = std::stod(text, &used);
    if (used == text.size() && rate > 0) return rate;
  } catch (const std::exception&) {
  }
  return make_error(errc::invalid_argument,
                    fmt::format("--arrival-rate: '{}' is not a positive rate or inf", text));
}

std::vector<request_spec> make_workload(int32_t requests, std::pair<int32_t, int32_t> prompt_len,
                                        std::pair<int32_t, int32_t> output_len, double rate,
                                        int32_t vocab, uint64_t seed, int32_t shared_prefix_len,
                                        int32_t num_prefixes) {
  rng g{seed * 0x2545f4914f6cdd1dull + 1};
  // The prefixes and each request's choice come from their own stream: the rest of the
  // workload stays as without them.
  rng p{seed * 0x9e3779b97f4a7c15ull + 7};
  // Without a shared prefix: one empty prefix, and nothing drawn from `p`.
  std::vector<std::vector<int32_t>> prefixes(
      shared_prefix_len > 0 ? static_cast<size_t>(std::max(num_prefixes, 1)) : 1);
  for (auto& prefix : prefixes)
    for (int32_t k = 0; k < shared_prefix_len; ++k)
      prefix.push_back(p.uniform(0, vocab - 1));
  std::vector<request_spec> out;
  double t = 0.0;
  for (int32_t i = 0; i < requests; ++i) {
    request_spec r;
    r.request_id = static_cast<uint64_t>(i);
    const int32_t n = g.uniform(prompt_len.first, prompt_len.second);
    const auto& prefix = prefixes[static_cast<size_t>(
        prefixes.size() == 1 ? 0 : p.uniform(0, static_cast<int32_t>(prefixes.size()) - 1))];
    for (int32_t k = 0; k < n; ++k) {
      const int32_t t = g.uniform(0, vocab - 1);
      r.prompt.push_back(k < std::ssize(prefix) ? prefix[static_cast<size_t>(k)] : t);
    }
    r.max_output_tokens = g.uniform(output_len.first, output_len.second);
    if (rate > 0 && i > 0) t += -std::log(1.0 - g.unit()) / rate;
    r.arrival_ns = static_cast<int64_t>(t * 1e9);
    out.push_back(std::move(r));
  }
  return out;
}

int64_t ideal_prefix_hit_tokens(const std::vector<request_spec>& workload, int32_t block_size) {
  if (block_size <= 0) return 0;
  std::set<std::pair<uint64_t, uint64_t>> seen; // every earlier prompt's full-block hashes
  int64_t ideal = 0;
  for (const auto& r : workload) {
    const auto blocks = (std::ssize(r.prompt) - 1) / block_size;
    const auto all = std::ssize(r.prompt) / block_size;
    block_hash h;
    bool hitting = true;
    for (int64_t k = 0; k < all; ++k) {
      h = hash_block(h,
                     std::span(r.prompt).subspan(static_cast<size_t>(k * block_size),
                                                 static_cast<size_t>(block_size)),
                     0);
      const bool known = !seen.insert({h.hi, h.lo}).second;
      hitting = hitting && known;
      if (hitting && k < blocks) ideal += block_size;
    }
  }
  return ideal;
}

} // namespace kvactor
