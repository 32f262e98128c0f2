// Per request and per KV cache group: the block table (manager block ids, 0 = null block), drawn
// from the one shared block_pool (see block_pool.hpp for why there is one pool, not one per group).
//
// How a group's table grows, by the group's kind (group_kind(spec)):
//   mamba            one block per request for its whole life (the recurrent state)
//   sliding_window   one block per block_size tokens; blocks that fell out of the window are
//   (and _mla)       returned to the pool and their entries become the null block
//   chunked_local    like sliding_window, but everything before the current chunk is released
//   anything else    one block per block_size tokens, kept until the request ends
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "actors/driver/block_pool.hpp"
#include "messages/errc.hpp"
#include "messages/kv.hpp"
#include "messages/step.hpp"

namespace kvactor {

class kv_block_manager {
public:
  /// REQUIRES: every spec.block_size > 0; `pool` outlives the manager.
  kv_block_manager(std::vector<kv_cache_group> groups, block_pool& pool);

  /// Blocks that allocate() would take from the pool to make `total_tokens` fit, before any
  /// sliding-window release is credited (summed over all groups).
  int64_t blocks_needed(uint64_t request_id, int64_t total_tokens) const;

  /// Upper bound of the blocks one request holds at once over its life when it never has more
  /// than `num_tokens` tokens in the cache and feeds at most `max_chunk_tokens` per step. A
  /// request whose bound exceeds the pool's capacity might never complete.
  int64_t peak_blocks(int64_t num_tokens, int64_t max_chunk_tokens) const;

  /// Makes room for tokens [0, total_tokens) of a request that has `num_computed_tokens` in the
  /// cache: first releases the blocks no later step can read (sliding window / local chunk),
  /// then appends blocks. All or nothing across groups: fails with insufficient_memory, changing
  /// nothing, when the pool (plus what the release would return) cannot provide the blocks.
  /// Returns the block-table writes for the ranks: per group, one update writing 0 over the
  /// released entries and one with the appended ids, each starting at its first changed entry.
  expected<std::vector<block_table_update>>
  allocate(uint64_t request_id, int64_t num_computed_tokens, int64_t total_tokens);

  /// Returns all blocks of a request to the pool and forgets its tables; returns how many
  /// blocks were freed (0 for a request without blocks).
  int32_t free(uint64_t request_id);

  /// Blocks a request holds now (null entries do not count), summed over groups.
  int32_t num_blocks_of(uint64_t request_id) const;

  /// One group's block table of a request (empty when it holds none).
  std::vector<int32_t> table_of(uint64_t request_id, int32_t group_id) const;

  int32_t num_groups() const { return static_cast<int32_t>(groups_.size()); }

  // ---- prefix caching ------------------------------------------------------------------------
  // What kvactor decides per group (vLLM's hybrid rules, one block size for all groups):
  //   full attention   hits as far as every leading block is cached
  //   sliding window   hits at a length L when the blocks a query at L reads ([L - W + 1, L),
  //                    W including retained tokens) are cached; the blocks before them enter its
  //                    table as null blocks, as if released by the window
  //   chunked local    the same, with the blocks of L's chunk
  //   state (mamba)    no rule: a model with a state group caches nothing (caches_prefixes()
  //                    false), as does one whose groups have different block sizes
  // A prefix hits at the longest length every group can serve. Each group hashes under its own
  // salt (its index), so one group's blocks never answer for another's.

  /// Turns prefix caching on or off (off: no hits, no registrations, frees in table order).
  void set_prefix_caching(bool on);
  /// On, and the groups allow it (see above).
  bool caches_prefixes() const { return caches_prefixes_; }

  /// For a request that holds no blocks: the leading full blocks of `tokens` (prompt + output)
  /// that the pool has cached for every group, at most `max_tokens` tokens' worth, become the
  /// start of its tables (one more reference each). Returns the tokens they hold (0 when off or
  /// nothing hits) and appends the table writes for the ranks to `updates`.
  int64_t take_cached_prefix(uint64_t request_id, std::span<const int32_t> tokens,
                             int64_t max_tokens, std::vector<block_table_update>& updates);

  /// Registers the request's blocks that are full once `num_computed_tokens` tokens of `tokens`
  /// are in the cache, so that later requests can hit them. A no-op when off.
  void cache_full_blocks(uint64_t request_id, std::span<const int32_t> tokens,
                         int64_t num_computed_tokens);
  /// Whether cache_full_blocks would register anything (cheap: no tokens needed).
  bool has_uncached_full_blocks(uint64_t request_id, int64_t num_computed_tokens) const;

private:
  enum class growth { full, sliding, chunked, single };

  struct group_rule {
    growth kind = growth::full;
    int64_t block_size = 16;
    int64_t window = 0; // sliding: tokens kept (incl. extra retained); chunked: chunk size
  };

  struct request_tables {
    std::vector<std::vector<int32_t>> tables; // [num_groups][num entries]
    std::vector<int32_t> num_released;        // [num_groups] leading null entries
    // Prefix caching, per group: leading blocks registered (or hit), and the last one's hash.
    std::vector<int32_t> num_hashed;
    std::vector<block_hash> last_hash;
  };
  request_tables empty_tables() const;

  // Entries [0, result) of a table no step after `num_computed_tokens` reads again.
  int64_t first_live_block(const group_rule& g, int64_t num_computed_tokens) const;
  // The blocks of one group for tokens [0, num_blocks x block_size): each one's hash and its
  // cached id (null_block_id when not cached). A full group stops at its first miss.
  struct cached_chain {
    std::vector<block_hash> hashes;
    std::vector<int32_t> ids;
  };
  cached_chain cached_blocks(size_t g, std::span<const int32_t> tokens, int64_t num_blocks) const;
  // The longest m <= limit (in blocks) at which a group can resume from the cache.
  int64_t longest_hit(const group_rule& g, const cached_chain& chain, int64_t limit) const;
  // Entries a table must have to hold `total_tokens`.
  int64_t entries_for(const group_rule& g, int64_t total_tokens) const;

  std::vector<group_rule> rules_;
  std::vector<kv_cache_group> groups_;
  block_pool* pool_;
  std::unordered_map<uint64_t, request_tables> requests_;
  bool caches_prefixes_ = false;
};

} // namespace kvactor
