#include "actors/driver/prefix_hold.hpp"

namespace kvactor {

std::vector<block_hash> prefix_hold::chain_of(std::span<const int32_t> tokens, int64_t block_size) {
  std::vector<block_hash> chain;
  if (tokens.empty() || block_size < 1) return chain;
  const auto n = static_cast<int64_t>(tokens.size() - 1) / block_size;
  block_hash h;
  for (int64_t k = 0; k < n; ++k) {
    h = hash_block(
        h, tokens.subspan(static_cast<size_t>(k * block_size), static_cast<size_t>(block_size)), 0);
    chain.push_back(h);
  }
  return chain;
}

void prefix_hold::add_computing(std::span<const block_hash> chain, const block_pool& pool) {
  for (const auto& h : chain)
    if (!pool.find_cached(h)) computing_.insert(h);
}

bool prefix_hold::waits_for_computing(std::span<const block_hash> chain) const {
  if (computing_.empty()) return false;
  for (const auto& h : chain)
    if (computing_.count(h) != 0) return true;
  return false;
}

} // namespace kvactor
