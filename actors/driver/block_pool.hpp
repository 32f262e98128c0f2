// The driver's pool of KV cache block ids: one pool for every KV cache group.
//
// NOTE: one pool serves every group, not one per group: the groups of a KV cache config alias
// one backing allocation from byte 0 (docs/vllm-semantics.md §9 item 2): block id b names the same
// bytes in every group. Separate per-group pools would hand the same id to two groups at once and
// corrupt each other's pages. So there is ONE free queue of ids here, and kv_block_manager keeps
// one block table per group per request on top of it.
//
// Prefix caching (vLLM's automatic prefix caching): a full block may be registered under the hash
// of its contents (block_hash: the previous block's hash chained with its tokens). A block stays
// registered after its last reference is freed: it waits in the free queue, and a request whose
// prefix hashes to it takes it back (touch) instead of recomputing it. Allocation takes the least
// recently freed block and evicts its registration. Reference counts let one block serve many
// requests.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

/// The id of the null block: never handed out; block tables hold it where no block is needed
/// (padding, or blocks a sliding window released).
inline constexpr int32_t null_block_id = 0;

/// The identity of a full block's contents: 128 bits from two independent 64-bit mixes of the
/// parent block's hash, a salt (what else makes the KV differ: the KV cache group, the model) and
/// the block's token ids. Different prefixes collide with probability ~2^-128 per pair, and a
/// collision would hand a request another prefix's KV: accepted, as vLLM accepts its hashes'.
struct block_hash {
  uint64_t hi = 0, lo = 0;
  bool operator==(const block_hash&) const = default;
};

/// The hash of a block holding `tokens` after the block hashed `parent` (block_hash{} for the
/// first block of a sequence).
block_hash hash_block(const block_hash& parent, std::span<const int32_t> tokens, uint64_t salt);

class block_pool {
public:
  /// Ids [0, num_blocks); block 0 is the null block, so num_blocks - 1 ids can be allocated.
  /// REQUIRES: 1 <= num_blocks <= INT32_MAX.
  explicit block_pool(int32_t num_blocks);

  /// Takes `n` ids from the front of the free queue (all or nothing), each with one reference;
  /// a registered block taken this way is evicted (its hash forgotten). Fails with
  /// invalid_argument for n < 0 and insufficient_memory when fewer than n ids are free.
  expected<std::vector<int32_t>> allocate(int32_t n);

  /// Drops one reference per listed id; an id whose last reference goes returns to the back of
  /// the free queue (FIFO reuse: the least recently freed id is handed out first), keeping its
  /// registration. Fails, changing nothing, when an id is out of range, the null block, or
  /// listed more often than it has references (a double free).
  status free(const std::vector<int32_t>& ids);

  /// The block registered under `h`, if any (in use or waiting in the free queue).
  std::optional<int32_t> find_cached(const block_hash& h) const;
  /// One more reference to a registered block (a prefix-cache hit); a block in the free queue
  /// leaves it. Fails for an id that is not registered.
  status touch(int32_t id);
  /// Registers an allocated block under `h` (its contents are now full and known); nothing
  /// changes when `h` already names a block (the same contents twice keep the first) or the block
  /// already has a hash. Fails for an id that is not allocated.
  status cache(int32_t id, const block_hash& h);

  int32_t num_blocks() const { return static_cast<int32_t>(refs_.size()); }
  /// Ids that can ever be allocated: num_blocks - 1.
  int32_t capacity() const { return num_blocks() - 1; }
  /// Ids in the free queue, registered ones included (allocation evicts them).
  int32_t num_free() const { return num_free_; }
  int32_t num_used() const { return capacity() - num_free(); }
  /// The highest num_used() seen since construction.
  int32_t peak_used() const { return peak_used_; }
  int32_t ref_count(int32_t id) const { return refs_[static_cast<size_t>(id)]; }
  /// Registered blocks, in use or free.
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  /// Registrations allocation has dropped since construction.
  int64_t num_evicted() const { return evicted_; }
  /// The free queue, front first (for tests and diagnostics).
  std::vector<int32_t> free_queue() const;

private:
  void push_back(int32_t id);
  void unlink(int32_t id);
  status check_id(int32_t id, const char* who) const;

  // The free queue: a doubly linked list through next_/prev_ (-1 ends it), O(1) removal of a
  // block a hit takes back.
  std::vector<int32_t> next_, prev_;
  int32_t head_ = -1, tail_ = -1, num_free_ = 0;
  std::vector<int32_t> refs_; // [num_blocks]
  std::vector<std::optional<block_hash>> hash_of_;
  struct hash_key {
    size_t operator()(const block_hash& h) const { return static_cast<size_t>(h.lo ^ h.hi); }
  };
  std::unordered_map<block_hash, int32_t, hash_key> by_hash_;
  int32_t peak_used_ = 0;
  int64_t evicted_ = 0;
};

} // namespace kvactor
