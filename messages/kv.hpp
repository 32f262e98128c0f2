// KV cache specs (per layer), groups, tensors, views and the whole KV cache config.
// Formulas follow docs/vllm-semantics.md §2 (Era C): K and V of one (head, token) are packed
// together in the innermost "content" dimension.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/dtype.hpp"
#include "messages/errc.hpp"

namespace kvactor {

enum class kv_cache_spec_kind : uint8_t {
  full,
  sliding_window,
  chunked_local,
  mla,
  sliding_window_mla,
  cross_attention,
  encoder_only,
  sink_full,
  mamba,
  uniform_type, // wrapper: one spec per layer, same block size and kind family
};

std::string_view to_string(kv_cache_spec_kind x);

/// Mamba cache modes: how many state pages one request holds.
enum class mamba_cache_mode : uint8_t { none, all, align };

/// What one layer (or, for uniform_type, a set of layers) needs per block.
/// A flat tagged record: fields that a kind does not use stay at their defaults, so value
/// equality is plain member-wise equality, as in vLLM's frozen dataclasses.
struct kv_cache_spec {
  kv_cache_spec_kind kind = kv_cache_spec_kind::full;
  int32_t block_size = 16; // tokens per manager block
  // Attention kinds.
  int32_t num_kv_heads = 0;
  int32_t head_size = 0;
  int32_t head_size_v = 0; // MLA: 0
  dtype kv_dtype = dtype::bfloat16;
  int64_t page_size_padded = 0; // 0 = no padding
  int32_t sliding_window = 0;   // 0 = none (full attention may carry one, see merge)
  int32_t attention_chunk_size = 0;
  int32_t extra_retained_tokens = 0; // sliding window: MTP speculation keeps more
  int32_t sink_len = 0;
  bool non_causal = false;
  int32_t tokens_per_state = 1; // compressed caches keep one state per this many tokens
  // Mamba / linear-attention state.
  std::vector<std::vector<int64_t>> state_shapes;
  std::vector<dtype> state_dtypes;
  mamba_cache_mode cache_mode = mamba_cache_mode::none;
  int32_t num_speculative_blocks = 0;
  // uniform_type: per-layer specs, index-aligned with layer_names.
  std::vector<std::string> layer_names;
  std::vector<kv_cache_spec> layer_specs;

  bool operator==(const kv_cache_spec&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_cache_spec& x) {
  return f(caf::meta::type_name("kvactor::kv_cache_spec"), x.kind, x.block_size, x.num_kv_heads,
           x.head_size, x.head_size_v, x.kv_dtype, x.page_size_padded, x.sliding_window,
           x.attention_chunk_size, x.extra_retained_tokens, x.sink_len, x.non_causal,
           x.tokens_per_state, x.state_shapes, x.state_dtypes, x.cache_mode,
           x.num_speculative_blocks, x.layer_names, x.layer_specs);
}

/// Limits that decide how much memory one request may need.
struct memory_limits {
  int64_t max_model_len = 0;
  int64_t max_in_flight_tokens = 0;     // max_num_batched_tokens
  int64_t max_encoder_input_tokens = 0; // cross attention
  int32_t dcp_size = 1;

  bool operator==(const memory_limits&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, memory_limits& x) {
  return f(caf::meta::type_name("kvactor::memory_limits"), x.max_model_len, x.max_in_flight_tokens,
           x.max_encoder_input_tokens, x.dcp_size);
}

// ---- constructors for each kind ------------------------------------------------------------

kv_cache_spec full_attention_spec(int32_t block_size, int32_t num_kv_heads, int32_t head_size,
                                  dtype dt, int32_t sliding_window = 0);
kv_cache_spec sliding_window_spec(int32_t block_size, int32_t num_kv_heads, int32_t head_size,
                                  dtype dt, int32_t sliding_window);
kv_cache_spec chunked_local_spec(int32_t block_size, int32_t num_kv_heads, int32_t head_size,
                                 dtype dt, int32_t chunk_size);
/// MLA: one latent of `head_size` (kv_lora_rank + rope dim) per token, no separate V.
kv_cache_spec mla_spec(int32_t block_size, int32_t head_size, dtype dt);
kv_cache_spec cross_attention_spec(int32_t block_size, int32_t num_kv_heads, int32_t head_size,
                                   dtype dt);
kv_cache_spec encoder_only_spec(int32_t block_size, int32_t num_kv_heads, int32_t head_size,
                                dtype dt);
kv_cache_spec mamba_spec(int32_t block_size, std::vector<std::vector<int64_t>> shapes,
                         std::vector<dtype> dtypes, mamba_cache_mode mode = mamba_cache_mode::none);

// ---- formulas ------------------------------------------------------------------------------

/// True for the kinds with heads/head size/dtype (everything but mamba and the wrapper).
bool is_attention_kind(kv_cache_spec_kind k);
/// True for full, mla and sink_full (the FullAttention family in vLLM).
bool is_full_family(kv_cache_spec_kind k);
bool is_mla_kind(kv_cache_spec_kind k);

/// States a block of `block_size` tokens holds: block_size / tokens_per_state.
int64_t num_kernel_states(const kv_cache_spec& s, int64_t block_size);
/// Bytes of one (head, token) state: (head_size + head_size_v) x dtype size.
int64_t state_content_size_bytes(const kv_cache_spec& s);
/// The page before padding: heads x states per block x content (Mamba: sum of state tensors).
int64_t real_page_size_bytes(const kv_cache_spec& s);
/// The page a block of this layer occupies (padded if page_size_padded is set).
int64_t page_size_bytes(const kv_cache_spec& s);
/// Upper bound of bytes one request of max_model_len needs in this layer (§2.3 table).
int64_t max_memory_usage_bytes(const kv_cache_spec& s, const memory_limits& lim);
/// Block-table row length: ceil(max_len / (block_size x dcp)).
int64_t max_num_blocks_per_req(const kv_cache_spec& s, int64_t max_len, int32_t dcp_size = 1);
/// Copy with a new manager block size (the wrapper's layers change too).
kv_cache_spec with_block_size(const kv_cache_spec& s, int32_t block_size);

/// Merges specs that must describe one group: fails (incompatible_specs) unless they are equal,
/// except that full attention specs may differ in sliding window / chunk size (at most one
/// non-zero value of each; not both) and non_causal (any).
expected<kv_cache_spec> merge_specs(const std::vector<kv_cache_spec>& specs);
/// True when every spec merges into one (full attention with and without window counts).
bool is_uniform(const std::vector<kv_cache_spec>& specs);
/// The uniform_type wrapper when all specs share block size and kind family, else an error.
expected<kv_cache_spec> uniform_type_from_specs(const std::vector<std::string>& names,
                                                const std::vector<kv_cache_spec>& specs);
/// The kind a group reports: the wrapper's common kind (full family → full).
kv_cache_spec_kind group_kind(const kv_cache_spec& s);

// ---- structural records --------------------------------------------------------------------

/// Layers that share one block table (one block id → one page in each of these layers).
struct kv_cache_group {
  std::vector<std::string> layer_names;
  kv_cache_spec spec;

  bool operator==(const kv_cache_group&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_cache_group& x) {
  return f(caf::meta::type_name("kvactor::kv_cache_group"), x.layer_names, x.spec);
}

/// The spec one layer of `group` uses: its entry in a uniform-type wrapper (a layer the wrapper
/// does not list, such as a KV-sharing layer, takes the first entry), else the group's spec.
const kv_cache_spec& layer_spec_of(const kv_cache_group& group, const std::string& layer);

/// Physical order of the logical [L, B, H, N, C] allocation (§2.6), outermost first.
enum class kv_cache_layout : uint8_t { lbhnc, lbnhc, lhbnc, blhnc, blnhc, bhlnc };

std::string_view to_string(kv_cache_layout x);
/// Accepts the names above in either case and the aliases HND (LBHNC) and NHD (LBNHC).
expected<kv_cache_layout> parse_kv_cache_layout(std::string_view name);

/// Page of layer l, block b starts at offset + l x layer_stride + b x block_stride.
/// Every tensor of a config reports the same size: one backing allocation, groups alias it.
struct kv_cache_tensor {
  int64_t size = 0;
  std::vector<std::string> layers;
  int64_t layer_stride = 0;
  int64_t block_stride = 0;
  int64_t offset = 0;

  bool operator==(const kv_cache_tensor&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_cache_tensor& x) {
  return f(caf::meta::type_name("kvactor::kv_cache_tensor"), x.size, x.layers, x.layer_stride,
           x.block_stride, x.offset);
}

struct kv_cache_config {
  int64_t num_blocks = 0;
  std::vector<kv_cache_tensor> tensors;
  std::vector<kv_cache_group> groups;
  kv_cache_layout layout = kv_cache_layout::lbhnc;

  bool operator==(const kv_cache_config&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_cache_config& x) {
  return f(caf::meta::type_name("kvactor::kv_cache_config"), x.num_blocks, x.tensors, x.groups,
           x.layout);
}

/// One layer's window into the backing allocation: a 4-D [blocks, heads, states, content]
/// strided view, in elements of `element_type`, starting `offset_bytes` into the allocation.
struct kv_cache_view {
  std::string layer;
  dtype element_type = dtype::bfloat16;
  std::vector<int64_t> shape;   // [B', H, N', C]
  std::vector<int64_t> strides; // elements
  int64_t offset_bytes = 0;

  bool operator==(const kv_cache_view&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_cache_view& x) {
  return f(caf::meta::type_name("kvactor::kv_cache_view"), x.layer, x.element_type, x.shape,
           x.strides, x.offset_bytes);
}

/// vLLM's capacity figures: tokens = int(max_concurrency x max_model_len).
struct kv_cache_capacity {
  int64_t tokens = 0;
  double max_concurrency = 0.0;

  bool operator==(const kv_cache_capacity&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, kv_cache_capacity& x) {
  return f(caf::meta::type_name("kvactor::kv_cache_capacity"), x.tokens, x.max_concurrency);
}

} // namespace kvactor
