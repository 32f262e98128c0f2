#include "actors/driver/block_pool.hpp"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace kvactor {

block_pool::block_pool(int32_t num_blocks) : allocated_(std::max(num_blocks, 1), false) {
  assert(num_blocks >= 1);
  for (int32_t id = 1; id < this->num_blocks(); ++id)
    free_.push_back(id);
}

expected<std::vector<int32_t>> block_pool::allocate(int32_t n) {
  if (n < 0)
    return make_error(errc::invalid_argument, fmt::format("block_pool::allocate: n = {} < 0", n));
  if (n > num_free())
    return make_error(errc::insufficient_memory,
                      fmt::format("block_pool::allocate: {} blocks requested, {} free of {}", n,
                                  num_free(), capacity()));
  std::vector<int32_t> ids(free_.begin(), free_.begin() + n);
  free_.erase(free_.begin(), free_.begin() + n);
  for (auto id : ids)
    allocated_[id] = true;
  peak_used_ = std::max(peak_used_, num_used());
  return ids;
}

status block_pool::free(const std::vector<int32_t>& ids) {
  // Validate everything first so that a bad list leaves the pool untouched.
  std::vector<bool> seen(allocated_.size(), false);
  for (auto id : ids) {
    if (id < 0 || id >= num_blocks())
      return make_error(
          errc::invalid_argument,
          fmt::format("block_pool::free: block id {} out of range [0, {})", id, num_blocks()));
    if (id == null_block_id)
      return make_error(errc::invalid_argument,
                        "block_pool::free: block id 0 is the null block and is never allocated");
    if (!allocated_[id] || seen[id])
      return make_error(
          errc::invalid_argument,
          fmt::format("block_pool::free: block id {} is not allocated (double free)", id));
    seen[id] = true;
  }
  for (auto id : ids) {
    allocated_[id] = false;
    free_.push_back(id);
  }
  return ok();
}

} // namespace kvactor
