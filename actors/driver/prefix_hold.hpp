// In-batch prefix sharing (pure): requests that arrive together with a common prefix (n samples
// of one prompt, a burst of chats with one system prompt) would each compute that prefix, since
// none of it is in the cache yet when they are admitted in the same step. A waiting request
// whose leading full blocks a running request is still computing is held back instead, and
// admitted once those blocks are cached: it then starts past them (SGLang shares prefixes within
// a batch the same way). A hold lasts at most as long as the holder's prefill.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_set>
#include <vector>

#include "actors/driver/block_pool.hpp"

namespace kvactor {

class prefix_hold {
public:
  /// The hash chain of the full blocks a prefix hit could cover: tokens [0, n * block_size)
  /// with n = (tokens.size() - 1) / block_size (the last token is always computed). Hashed as
  /// the first KV cache group hashes them (salt 0).
  static std::vector<block_hash> chain_of(std::span<const int32_t> tokens, int64_t block_size);

  /// Blocks a running request will compute (those of its chain not cached yet).
  void add_computing(std::span<const block_hash> chain, const block_pool& pool);
  /// Whether any block of `chain` is one a running request is computing.
  bool waits_for_computing(std::span<const block_hash> chain) const;

private:
  struct hash_key {
    size_t operator()(const block_hash& h) const { return static_cast<size_t>(h.lo ^ h.hi); }
  };
  std::unordered_set<block_hash, hash_key> computing_;
};

} // namespace kvactor
