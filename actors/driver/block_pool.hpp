// The driver's pool of KV cache block ids: one pool for every KV cache group.
//
// NOTE: one pool serves every group, not one per group: the groups of a KV cache config alias
// one backing allocation from byte 0 (docs/vllm-semantics.md §9 item 2): block id b names the same
// bytes in every group. Separate per-group pools would hand the same id to two groups at once and
// corrupt each other's pages. So there is ONE free queue of ids here, and kv_block_manager keeps
// one block table per group per request on top of it; an id is owned by at most one (request,
// group).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// The id of the null block: never handed out; block tables hold it where no block is needed
/// (padding, or blocks a sliding window released).
inline constexpr int32_t null_block_id = 0;

class block_pool {
public:
  /// Ids [0, num_blocks); block 0 is the null block, so num_blocks - 1 ids can be allocated.
  /// REQUIRES: 1 <= num_blocks <= INT32_MAX.
  explicit block_pool(int32_t num_blocks);

  /// Takes `n` ids from the front of the free queue (all or nothing). Fails with
  /// invalid_argument for n < 0 and insufficient_memory when fewer than n ids are free.
  expected<std::vector<int32_t>> allocate(int32_t n);

  /// Returns ids to the back of the free queue (FIFO reuse: the least recently freed id is handed
  /// out first). Fails, freeing nothing, when an id is out of range, the null block, not
  /// allocated, or listed twice.
  status free(const std::vector<int32_t>& ids);

  int32_t num_blocks() const { return static_cast<int32_t>(allocated_.size()); }
  /// Ids that can ever be allocated: num_blocks - 1.
  int32_t capacity() const { return num_blocks() - 1; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return capacity() - num_free(); }
  /// The highest num_used() seen since construction.
  int32_t peak_used() const { return peak_used_; }

private:
  std::deque<int32_t> free_;    // front = next to hand out
  std::vector<bool> allocated_; // [num_blocks]
  int32_t peak_used_ = 0;
};

} // namespace kvactor
