// CUDA graph modes, batch descriptors and the graph plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/backend.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// Requested/resolved graph mode. The two tuple modes of vLLM are "separate routine" modes:
/// decode batches use the first element, mixed batches the second.
enum class cudagraph_mode : uint8_t {
  none = 0,
  piecewise = 1,
  full = 2,
  full_decode_only = 3,   // (full, none)
  full_and_piecewise = 4, // (full, piecewise)
};

std::string_view to_string(cudagraph_mode x);
expected<cudagraph_mode> parse_cudagraph_mode(std::string_view name);
/// The mode uniform-decode batches run in (none, piecewise or full).
cudagraph_mode decode_mode(cudagraph_mode m);
/// The mode mixed batches run in (none, piecewise or full).
cudagraph_mode mixed_mode(cudagraph_mode m);
bool has_full_cudagraphs(cudagraph_mode m);
bool has_piecewise_cudagraphs(cudagraph_mode m);

/// A batch shape: either a captured graph (mode piecewise/full) or what ran eagerly (none).
struct batch_descriptor {
  cudagraph_mode mode = cudagraph_mode::none; // runtime modes only: none, piecewise, full
  int32_t num_tokens = 0;                     // padded bucket
  int32_t num_reqs = 0;                       // 0 = no request padding (piecewise)
  int32_t uniform_token_count = 0;            // 0 = not a uniform batch
  int32_t max_query_len = 0;                  // 0 = no bound (varlen decode graphs set it)
  int32_t num_active_loras = 0;
  bool exact_num_tokens = false;
  int32_t num_ubatches = 1;

  bool operator==(const batch_descriptor&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, batch_descriptor& x) {
  return f(caf::meta::type_name("kvactor::batch_descriptor"), x.mode, x.num_tokens, x.num_reqs,
           x.uniform_token_count, x.max_query_len, x.num_active_loras, x.exact_num_tokens,
           x.num_ubatches);
}

/// The graphs a rank will capture, after resolving the mode against attention support.
struct cudagraph_plan {
  cudagraph_mode requested = cudagraph_mode::full_and_piecewise;
  cudagraph_mode mode = cudagraph_mode::none; // resolved
  graph_support_info support;
  int32_t uniform_decode_query_len = 1;
  std::vector<int32_t> capture_sizes;             // ascending
  std::vector<batch_descriptor> full_graphs;      // capture order: largest first
  std::vector<batch_descriptor> piecewise_graphs; // capture order: largest first
  std::vector<std::string> notes;                 // why the mode changed, if it did

  bool operator==(const cudagraph_plan&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, cudagraph_plan& x) {
  return f(caf::meta::type_name("kvactor::cudagraph_plan"), x.requested, x.mode, x.support,
           x.uniform_decode_query_len, x.capture_sizes, x.full_graphs, x.piecewise_graphs, x.notes);
}

/// Rank -> cudagraph: how one capture went. The graph manager replays a graph only once told it
/// is captured.
struct cudagraph_captured {
  batch_descriptor graph;
  int64_t bytes = 0; // device memory the graph holds
  int64_t duration_ns = 0;
  std::string error; // empty: captured; else why the graph stays eager

  bool operator==(const cudagraph_captured&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, cudagraph_captured& x) {
  return f(caf::meta::type_name("kvactor::cudagraph_captured"), x.graph, x.bytes, x.duration_ns,
           x.error);
}

} // namespace kvactor
