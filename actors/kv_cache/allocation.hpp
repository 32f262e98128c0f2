// From a plan to memory: the groups a rank binds, per-layer views, and the allocator that owns
// the one backing buffer of a rank's KV cache (host memory on the CPU device).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/kv_cache/layer_specs.hpp"
#include "actors/kv_cache/planner.hpp"
#include "messages/layer.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

/// The planned groups plus KV-sharing layers (appended to their target's group) and the
/// encoder-only groups (no memory): the groups backends, builders and views are keyed by.
expected<std::vector<kv_cache_group>> rank_groups(const kv_cache_config& config,
                                                  const std::vector<attention_layer>& layers,
                                                  const spec_options& opt);

/// One view per layer of every tensor, split into the group's kernel blocks (0 = none); each
/// KV-sharing layer gets its target's view under its own name.
expected<std::vector<kv_cache_view>> build_views(const kv_cache_config& config,
                                                 const std::vector<kv_cache_group>& groups,
                                                 const std::vector<int32_t>& kernel_block_sizes,
                                                 const std::map<std::string, std::string>& sharing);

/// Where a rank's KV cache lives: host memory (the CPU device) or one device allocation.
class kv_memory {
public:
  virtual ~kv_memory() = default;
  virtual std::byte* data() const = 0;
  /// "host" or "device": the memory ledger names it.
  virtual const char* where() const = 0;
};

/// Allocates `bytes` of zero-filled KV cache memory, or an error naming what failed.
using kv_memory_factory = std::function<expected<std::unique_ptr<kv_memory>>(int64_t bytes)>;

/// Zero-filled host memory (the CPU device's KV cache).
kv_memory_factory host_kv_memory();

/// Owns one rank's KV cache: plans it with the rank's budget, allocates the common block count
/// as one zero-filled allocation per planned tensor (Era C plans one, docs/vllm-semantics.md
/// §4.4; rounded up to 4 KiB) from `memory`, and keeps the memory ledger.
class kv_cache_allocator {
public:
  explicit kv_cache_allocator(kv_memory_factory memory = host_kv_memory())
      : memory_factory_(std::move(memory)) {}
  kv_cache_allocator(const kv_cache_allocator&) = delete;
  kv_cache_allocator& operator=(const kv_cache_allocator&) = delete;

  /// Plans `model`'s layers with `request.available_bytes` (or the block override).
  expected<kv_local_plan> plan(const model_layout& model, const kv_plan_request& request);

  /// Re-plans for exactly `num_blocks` blocks, allocates and builds the views.
  /// REQUIRES: plan() succeeded. Fails if num_blocks exceeds the planned count.
  expected<kv_allocation> allocate(int64_t num_blocks,
                                   const std::vector<int32_t>& kernel_block_sizes);

  /// The backing buffer (nullptr before allocate()); device memory for a GPU rank.
  std::byte* base() const { return memory_ ? memory_->data() : nullptr; }
  const kv_cache_config& config() const { return config_; }
  const std::vector<kv_cache_group>& groups() const { return groups_; }
  std::vector<memory_entry> ledger() const;

private:
  model_layout model_;
  kv_plan_request request_;
  kv_cache_config config_;
  std::vector<kv_cache_group> groups_;
  kv_memory_factory memory_factory_;
  std::unique_ptr<kv_memory> memory_;
  int64_t bytes_ = 0;
};

} // namespace kvactor
