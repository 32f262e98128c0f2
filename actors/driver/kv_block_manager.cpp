#include "actors/driver/kv_block_manager.hpp"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace kvactor {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A uniform_type wrapper carries the per-layer values in layer_specs; the largest one is the
// safe choice (releasing later than a layer needs wastes blocks, releasing earlier corrupts).
int64_t largest(const kv_cache_spec& s, int32_t kv_cache_spec::*field) {
  int64_t v = s.*field;
  for (const auto& l : s.layer_specs)
    v = std::max<int64_t>(v, l.*field);
  return v;
}

} // namespace

kv_block_manager::kv_block_manager(std::vector<kv_cache_group> groups, block_pool& pool)
    : groups_(std::move(groups)), pool_(&pool) {
  for (const auto& g : groups_) {
    assert(g.spec.block_size > 0);
    group_rule r;
    r.block_size = std::max(g.spec.block_size, 1);
    switch (group_kind(g.spec)) {
    case kv_cache_spec_kind::mamba: r.kind = growth::single; break;
    case kv_cache_spec_kind::sliding_window:
    case kv_cache_spec_kind::sliding_window_mla:
      r.window = largest(g.spec, &kv_cache_spec::sliding_window);
      if (r.window > 0) {
        r.window += largest(g.spec, &kv_cache_spec::extra_retained_tokens);
        r.kind = growth::sliding;
      }
      break;
    case kv_cache_spec_kind::chunked_local:
      r.window = largest(g.spec, &kv_cache_spec::attention_chunk_size);
      if (r.window > 0) r.kind = growth::chunked;
      break;
    default: break;
    }
    rules_.push_back(r);
  }
}

int64_t kv_block_manager::first_live_block(const group_rule& g, int64_t num_computed_tokens) const {
  // A query at position p >= num_computed_tokens reads [p - W + 1, p] (sliding window) or
  // [floor(p / C) x C, p] (local chunk); tokens below the smallest such start are dead.
  int64_t first_live_token = 0;
  if (g.kind == growth::sliding)
    first_live_token = std::max<int64_t>(0, num_computed_tokens - g.window + 1);
  else if (g.kind == growth::chunked)
    first_live_token = num_computed_tokens / g.window * g.window;
  return first_live_token / g.block_size;
}

int64_t kv_block_manager::entries_for(const group_rule& g, int64_t total_tokens) const {
  if (total_tokens <= 0) return 0;
  if (g.kind == growth::single) return 1;
  return ceil_div(total_tokens, g.block_size);
}

int64_t kv_block_manager::blocks_needed(uint64_t request_id, int64_t total_tokens) const {
  auto it = requests_.find(request_id);
  int64_t n = 0;
  for (size_t g = 0; g < rules_.size(); ++g) {
    int64_t have = it == requests_.end() ? 0 : static_cast<int64_t>(it->second.tables[g].size());
    n += std::max<int64_t>(0, entries_for(rules_[g], total_tokens) - have);
  }
  return n;
}

int64_t kv_block_manager::peak_blocks(int64_t num_tokens, int64_t max_chunk_tokens) const {
  int64_t n = 0;
  for (const auto& g : rules_) {
    int64_t all = entries_for(g, num_tokens);
    if (g.kind == growth::sliding || g.kind == growth::chunked) {
      // Live tokens span at most window - 1 + one chunk; a misaligned span touches one more block.
      int64_t span = g.window - 1 + std::max<int64_t>(max_chunk_tokens, 1);
      all = std::min(all, ceil_div(span, g.block_size) + 1);
    }
    n += all;
  }
  return n;
}

expected<std::vector<block_table_update>>
kv_block_manager::allocate(uint64_t request_id, int64_t num_computed_tokens, int64_t total_tokens) {
  if (num_computed_tokens < 0 || total_tokens < num_computed_tokens)
    return make_error(errc::invalid_argument,
                      fmt::format("kv_block_manager::allocate: request {}: num_computed_tokens = "
                                  "{}, total_tokens = {}",
                                  request_id, num_computed_tokens, total_tokens));
  auto it = requests_.find(request_id);
  request_tables empty = empty_tables();
  const request_tables& cur = it == requests_.end() ? empty : it->second;

  // Plan first (release ranges and appends per group), change nothing until it is known to fit.
  std::vector<int64_t> release_end(rules_.size()), appends(rules_.size());
  int64_t num_released = 0, num_appended = 0;
  for (size_t g = 0; g < rules_.size(); ++g) {
    auto size = static_cast<int64_t>(cur.tables[g].size());
    release_end[g] = std::clamp<int64_t>(first_live_block(rules_[g], num_computed_tokens),
                                         cur.num_released[g], size);
    // Only a block no other request shares (a prefix-cache hit) goes back to the free queue.
    for (auto i = cur.num_released[g]; i < release_end[g]; ++i)
      num_released += pool_->ref_count(cur.tables[g][static_cast<size_t>(i)]) == 1;
    appends[g] = std::max<int64_t>(0, entries_for(rules_[g], total_tokens) - size);
    num_appended += appends[g];
  }
  if (num_appended > pool_->num_free() + num_released)
    return make_error(errc::insufficient_memory,
                      fmt::format("kv_block_manager::allocate: request {} needs {} blocks, {} "
                                  "free (+{} released by its window)",
                                  request_id, num_appended, pool_->num_free(), num_released));

  auto& req = requests_.try_emplace(request_id, std::move(empty)).first->second;
  std::vector<block_table_update> updates;
  std::vector<int32_t> released;
  for (size_t g = 0; g < rules_.size(); ++g) {
    auto& table = req.tables[g];
    int32_t from = req.num_released[g];
    if (release_end[g] == from) continue;
    block_table_update u{request_id, static_cast<int32_t>(g), from, {}};
    for (auto i = from; i < release_end[g]; ++i) {
      released.push_back(table[i]);
      table[i] = null_block_id;
      u.block_ids.push_back(null_block_id);
    }
    req.num_released[g] = static_cast<int32_t>(release_end[g]);
    updates.push_back(std::move(u));
  }
  [[maybe_unused]] auto freed = pool_->free(released);
  assert(freed);
  auto fresh = pool_->allocate(static_cast<int32_t>(num_appended));
  assert(fresh);
  size_t next = 0;
  for (size_t g = 0; g < rules_.size(); ++g) {
    if (appends[g] == 0) continue;
    auto& table = req.tables[g];
    block_table_update u{
        request_id, static_cast<int32_t>(g), static_cast<int32_t>(table.size()), {}};
    u.block_ids.assign(fresh->begin() + next, fresh->begin() + next + appends[g]);
    next += appends[g];
    table.insert(table.end(), u.block_ids.begin(), u.block_ids.end());
    updates.push_back(std::move(u));
  }
  return updates;
}

kv_block_manager::request_tables kv_block_manager::empty_tables() const {
  return {std::vector<std::vector<int32_t>>(rules_.size()), std::vector<int32_t>(rules_.size(), 0),
          std::vector<int32_t>(rules_.size(), 0), std::vector<block_hash>(rules_.size())};
}

int32_t kv_block_manager::free(uint64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return 0;
  std::vector<int32_t> ids;
  for (const auto& table : it->second.tables) {
    // With prefix caching the tail of a prefix goes back to the free queue first, so that it,
    // not the head every longer prefix needs, is evicted first (vLLM frees in reverse too).
    const auto first = ids.size();
    for (auto id : table)
      if (id != null_block_id) ids.push_back(id);
    if (caches_prefixes_) std::reverse(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end());
  }
  requests_.erase(it);
  [[maybe_unused]] auto freed = pool_->free(ids);
  assert(freed);
  return static_cast<int32_t>(ids.size());
}

int32_t kv_block_manager::num_blocks_of(uint64_t request_id) const {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return 0;
  int32_t n = 0;
  for (const auto& table : it->second.tables)
    n += static_cast<int32_t>(
        std::count_if(table.begin(), table.end(), [](int32_t id) { return id != null_block_id; }));
  return n;
}

std::vector<int32_t> kv_block_manager::table_of(uint64_t request_id, int32_t group_id) const {
  auto it = requests_.find(request_id);
  if (it == requests_.end() || group_id < 0 || group_id >= num_groups()) return {};
  return it->second.tables[group_id];
}

void kv_block_manager::set_prefix_caching(bool on) {
  const bool hashable = std::all_of(rules_.begin(), rules_.end(), [&](const group_rule& g) {
    return g.kind != growth::single && g.block_size == rules_.front().block_size;
  });
  caches_prefixes_ = on && hashable && !rules_.empty();
}

kv_block_manager::cached_chain kv_block_manager::cached_blocks(size_t g,
                                                               std::span<const int32_t> tokens,
                                                               int64_t num_blocks) const {
  const int64_t bs = rules_[g].block_size;
  cached_chain chain;
  block_hash h;
  for (int64_t k = 0; k < num_blocks; ++k) {
    h = hash_block(h, tokens.subspan(static_cast<size_t>(k * bs), static_cast<size_t>(bs)), g);
    const auto id = pool_->find_cached(h);
    if (!id && rules_[g].kind == growth::full) break;
    chain.hashes.push_back(h);
    chain.ids.push_back(id.value_or(null_block_id));
  }
  return chain;
}

int64_t kv_block_manager::longest_hit(const group_rule& g, const cached_chain& chain,
                                      int64_t limit) const {
  limit = std::min<int64_t>(limit, std::ssize(chain.ids));
  if (g.kind == growth::full) // cached_blocks stopped at the first miss
    return limit;
  // run[k]: cached blocks in a row ending at block k.
  std::vector<int64_t> run(static_cast<size_t>(limit));
  for (int64_t k = 0; k < limit; ++k)
    run[k] = chain.ids[k] == null_block_id ? 0 : 1 + (k > 0 ? run[k - 1] : 0);
  for (int64_t m = limit; m > 0; --m)
    if (m - first_live_block(g, m * g.block_size) <= run[m - 1]) return m;
  return 0;
}

int64_t kv_block_manager::take_cached_prefix(uint64_t request_id, std::span<const int32_t> tokens,
                                             int64_t max_tokens,
                                             std::vector<block_table_update>& updates) {
  if (!caches_prefixes_ || requests_.contains(request_id)) return 0;
  const int64_t bs = rules_.front().block_size;
  int64_t n = std::min<int64_t>(max_tokens, std::ssize(tokens)) / bs;
  std::vector<cached_chain> chains;
  for (size_t g = 0; g < rules_.size(); ++g)
    chains.push_back(cached_blocks(g, tokens, n));
  // A window group valid at n may not be at a shorter length another group imposes: shorten
  // until every group agrees (n only falls, so this ends).
  for (bool shortened = true; shortened && n > 0;) {
    shortened = false;
    for (size_t g = 0; g < rules_.size(); ++g)
      if (const int64_t m = longest_hit(rules_[g], chains[g], n); m < n) {
        n = m;
        shortened = true;
      }
  }
  if (n <= 0) return 0;
  auto& req = requests_.emplace(request_id, empty_tables()).first->second;
  for (size_t g = 0; g < rules_.size(); ++g) {
    const int64_t first = first_live_block(rules_[g], n * bs);
    auto& table = req.tables[g];
    table.assign(chains[g].ids.begin(), chains[g].ids.begin() + n);
    std::fill(table.begin(), table.begin() + first, null_block_id);
    for (auto id : table) {
      if (id == null_block_id) continue;
      [[maybe_unused]] auto touched = pool_->touch(id);
      assert(touched);
    }
    req.num_released[g] = static_cast<int32_t>(first);
    req.num_hashed[g] = static_cast<int32_t>(n);
    req.last_hash[g] = chains[g].hashes[static_cast<size_t>(n - 1)];
    updates.push_back({request_id, static_cast<int32_t>(g), 0, table});
  }
  return n * bs;
}

void kv_block_manager::cache_full_blocks(uint64_t request_id, std::span<const int32_t> tokens,
                                         int64_t num_computed_tokens) {
  auto it = requests_.find(request_id);
  if (!caches_prefixes_ || it == requests_.end()) return;
  auto& req = it->second;
  const int64_t bs = rules_.front().block_size;
  const int64_t full = std::min<int64_t>(num_computed_tokens, std::ssize(tokens)) / bs;
  for (size_t g = 0; g < rules_.size(); ++g) {
    const int64_t upto = std::min<int64_t>(full, std::ssize(req.tables[g]));
    for (int64_t k = req.num_hashed[g]; k < upto; ++k) {
      const block_hash h =
          hash_block(req.last_hash[g],
                     tokens.subspan(static_cast<size_t>(k * bs), static_cast<size_t>(bs)), g);
      // A window may have released the block before it was registered: the chain goes on.
      if (const auto id = req.tables[g][static_cast<size_t>(k)]; id != null_block_id) {
        [[maybe_unused]] auto cached = pool_->cache(id, h);
        assert(cached);
      }
      req.last_hash[g] = h;
      req.num_hashed[g] = static_cast<int32_t>(k + 1);
    }
  }
}

bool kv_block_manager::has_uncached_full_blocks(uint64_t request_id,
                                                int64_t num_computed_tokens) const {
  auto it = requests_.find(request_id);
  if (!caches_prefixes_ || it == requests_.end()) return false;
  const int64_t full = num_computed_tokens / rules_.front().block_size;
  for (size_t g = 0; g < rules_.size(); ++g)
    if (std::min<int64_t>(full, std::ssize(it->second.tables[g])) > it->second.num_hashed[g])
      return true;
  return false;
}

} // namespace kvactor
