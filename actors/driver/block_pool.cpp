#include "actors/driver/block_pool.hpp"

#include <algorithm>
#include <cassert>
#include <map>

#include <fmt/format.h>

namespace kvactor {

namespace {

// splitmix64's finaliser: every input bit moves every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

block_hash hash_block(const block_hash& parent, std::span<const int32_t> tokens, uint64_t salt) {
  // Two chains with different constants; the token count closes each so that a block is not
  // the prefix of a longer one.
  uint64_t hi = mix(parent.hi ^ mix(salt + 0x9e3779b97f4a7c15ULL));
  uint64_t lo = mix(parent.lo + mix(salt ^ 0xc2b2ae3d27d4eb4fULL));
  for (int32_t t : tokens) {
    const auto u = static_cast<uint64_t>(static_cast<uint32_t>(t));
    hi = mix(hi ^ (u + 0x165667b19e3779f9ULL));
    lo = mix(lo + u * 0x27d4eb2f165667c5ULL + 1);
  }
  return {mix(hi ^ tokens.size()), mix(lo + tokens.size())};
}

block_pool::block_pool(int32_t num_blocks)
    : next_(std::max(num_blocks, 1), -1), prev_(std::max(num_blocks, 1), -1),
      refs_(std::max(num_blocks, 1), 0), hash_of_(std::max(num_blocks, 1)) {
  assert(num_blocks >= 1);
  for (int32_t id = 1; id < this->num_blocks(); ++id)
    push_back(id);
}

void block_pool::push_back(int32_t id) {
  prev_[id] = tail_;
  next_[id] = -1;
  if (tail_ >= 0)
    next_[tail_] = id;
  else
    head_ = id;
  tail_ = id;
  ++num_free_;
}

void block_pool::unlink(int32_t id) {
  if (prev_[id] >= 0)
    next_[prev_[id]] = next_[id];
  else
    head_ = next_[id];
  if (next_[id] >= 0)
    prev_[next_[id]] = prev_[id];
  else
    tail_ = prev_[id];
  prev_[id] = next_[id] = -1;
  --num_free_;
}

status block_pool::check_id(int32_t id, const char* who) const {
  if (id < 0 || id >= num_blocks())
    return make_error(errc::invalid_argument, fmt::format("block_pool::{}: block id {} out of "
                                                          "range [0, {})",
                                                          who, id, num_blocks()));
  if (id == null_block_id)
    return make_error(errc::invalid_argument,
                      fmt::format("block_pool::{}: block id 0 is the null block and is never "
                                  "allocated",
                                  who));
  return ok();
}

expected<std::vector<int32_t>> block_pool::allocate(int32_t n) {
  if (n < 0)
    return make_error(errc::invalid_argument, fmt::format("block_pool::allocate: n = {} < 0", n));
  if (n > num_free())
    return make_error(errc::insufficient_memory,
                      fmt::format("block_pool::allocate: {} blocks requested, {} free of {}", n,
                                  num_free(), capacity()));
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = head_;
    unlink(id);
    if (auto& h = hash_of_[id]) { // the least recently freed registered block: evicted
      by_hash_.erase(*h);
      h.reset();
      ++evicted_;
    }
    refs_[id] = 1;
    ids.push_back(id);
  }
  peak_used_ = std::max(peak_used_, num_used());
  return ids;
}

status block_pool::free(const std::vector<int32_t>& ids) {
  // Validate everything first so that a bad list leaves the pool untouched.
  std::map<int32_t, int32_t> drops;
  for (auto id : ids) {
    if (auto s = check_id(id, "free"); !s) return s;
    if (++drops[id] > refs_[id])
      return make_error(
          errc::invalid_argument,
          fmt::format("block_pool::free: block id {} is not allocated (double free)", id));
  }
  for (auto id : ids)
    if (--refs_[id] == 0) push_back(id);
  return ok();
}

std::optional<int32_t> block_pool::find_cached(const block_hash& h) const {
  const auto it = by_hash_.find(h);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

status block_pool::touch(int32_t id) {
  if (auto s = check_id(id, "touch"); !s) return s;
  if (!hash_of_[id])
    return make_error(errc::invalid_argument,
                      fmt::format("block_pool::touch: block id {} holds no cached prefix", id));
  if (refs_[id]++ == 0) {
    unlink(id);
    peak_used_ = std::max(peak_used_, num_used());
  }
  return ok();
}

status block_pool::cache(int32_t id, const block_hash& h) {
  if (auto s = check_id(id, "cache"); !s) return s;
  if (refs_[id] == 0)
    return make_error(errc::invalid_argument,
                      fmt::format("block_pool::cache: block id {} is not allocated", id));
  if (hash_of_[id] || by_hash_.contains(h)) return ok();
  hash_of_[id] = h;
  by_hash_.emplace(h, id);
  return ok();
}

std::vector<int32_t> block_pool::free_queue() const {
  std::vector<int32_t> out;
  for (int32_t id = head_; id >= 0; id = next_[id])
    out.push_back(id);
  return out;
}

} // namespace kvactor
