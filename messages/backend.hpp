// Attention backends: declared capabilities, attention groups and graph support.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/dtype.hpp"
#include "messages/kv.hpp"

namespace kvactor {

/// How far FULL CUDA graphs can cover a backend's attention (ordered: weaker is smaller).
enum class graph_support : uint8_t {
  never = 0,
  uniform_single_token_decode = 1,
  uniform_batch = 2,
  always = 3,
};

std::string_view to_string(graph_support x);
expected<graph_support> parse_graph_support(std::string_view name);

/// A supported kernel block size: exactly `value`, or any multiple of it.
struct block_size_constraint {
  int32_t value = 1;
  bool multiple_of = false;

  bool operator==(const block_size_constraint&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, block_size_constraint& x) {
  return f(caf::meta::type_name("kvactor::block_size_constraint"), x.value, x.multiple_of);
}

inline block_size_constraint exactly(int32_t v) {
  return {v, false};
}
inline block_size_constraint multiple_of(int32_t v) {
  return {v, true};
}

/// What an attention backend declares about itself (docs/vllm-semantics.md §5.2). The registry
/// decides with these alone; no backend code runs to answer "can you serve this layer?".
struct backend_capabilities {
  std::string name;
  std::vector<block_size_constraint> kernel_block_sizes; // empty = any
  std::vector<kv_cache_spec_kind> spec_kinds;            // kinds it can serve
  std::vector<dtype> kv_dtypes;                          // empty = any
  std::vector<int32_t> head_sizes;                       // empty = any
  kv_cache_layout layout = kv_cache_layout::lbhnc;
  graph_support cudagraph_support = graph_support::never;
  bool supports_sinks = false;
  bool query_lens_mismatch_ok = false; // tolerates a CPU query-length over-estimate
  bool requires_gpu = false;
  int64_t workspace_bytes = 0; // shared among all builders of all groups
  int32_t reorder_batch_threshold = 1;
  int32_t priority = 0; // higher wins when several backends can serve a layer

  bool operator==(const backend_capabilities&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, backend_capabilities& x) {
  return f(caf::meta::type_name("kvactor::backend_capabilities"), x.name, x.kernel_block_sizes,
           x.spec_kinds, x.kv_dtypes, x.head_sizes, x.layout, x.cudagraph_support, x.supports_sinks,
           x.query_lens_mismatch_ok, x.requires_gpu, x.workspace_bytes, x.reorder_batch_threshold,
           x.priority);
}

/// Layers of one KV cache group that share a backend, a per-layer spec and a query-head count;
/// one metadata build serves all of them.
struct attention_group {
  std::string backend;
  std::vector<std::string> layer_names;
  kv_cache_spec spec; // per-layer spec
  int32_t kv_cache_group_id = 0;
  int32_t num_heads_q = 0;

  bool operator==(const attention_group&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, attention_group& x) {
  return f(caf::meta::type_name("kvactor::attention_group"), x.backend, x.layer_names, x.spec,
           x.kv_cache_group_id, x.num_heads_q);
}

/// The weakest graph support over attention groups and the backend that caused it.
struct graph_support_info {
  graph_support min_support = graph_support::always;
  std::string backend; // empty while nothing narrowed it

  /// A copy narrowed to `s` if `s` is strictly weaker, else *this (first culprit wins ties).
  graph_support_info narrow(graph_support s, const std::string& by) const {
    if (static_cast<uint8_t>(s) < static_cast<uint8_t>(min_support)) return {s, by};
    return *this;
  }

  bool operator==(const graph_support_info&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, graph_support_info& x) {
  return f(caf::meta::type_name("kvactor::graph_support_info"), x.min_support, x.backend);
}

} // namespace kvactor
