// The attention backend registry (pure core): resolves a backend per layer, forms attention
// groups, picks kernel block sizes and reports the weakest CUDA graph support
// (docs/vllm-semantics.md §1.6–1.8, §4).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "messages/backend.hpp"
#include "messages/device.hpp"
#include "messages/errc.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"

namespace kvactor {

class backend_registry {
public:
  /// An empty registry; `with_builtins()` has the backends of catalog.hpp.
  backend_registry() = default;
  static backend_registry with_builtins();

  /// Fails on an empty or duplicate name.
  status add(backend_capabilities caps);
  /// nullptr when unknown.
  const backend_capabilities* find(std::string_view name) const;
  std::vector<std::string> names() const;

  /// Why `caps` cannot serve `layer` with `spec` on `device`; empty when it can.
  static std::string veto(const backend_capabilities& caps, const attention_layer& layer,
                          const kv_cache_spec& spec, device_kind device);

  /// The backend for one layer: `preferred` if given and able (else an error naming the reason),
  /// otherwise the highest-priority able backend (first registered wins ties).
  expected<std::string> resolve(const attention_layer& layer, const kv_cache_spec& spec,
                                device_kind device, std::string_view preferred = {}) const;

private:
  std::vector<backend_capabilities> backends_;
};

/// A layer's backend and per-rank query-head count, as attention grouping needs them.
struct layer_binding {
  std::string backend;
  int32_t num_heads_q = 0;
};

/// One list of attention groups per KV cache group (index-aligned), keyed by (backend, per-layer
/// spec, query heads), in first-seen order. Every layer must have a binding.
expected<std::vector<std::vector<attention_group>>>
build_attention_groups(const std::vector<kv_cache_group>& groups,
                       const std::map<std::string, layer_binding>& bindings);

/// The manager block size if every backend supports it, else the largest exact size that
/// divides it and every backend supports; fails (no_common_block_size) otherwise.
expected<int32_t>
select_common_block_size(int32_t manager_block_size,
                         const std::vector<const backend_capabilities*>& backends);

/// Block size for sparse (HiSparse-style) attention specs: the largest divisor of the manager
/// block size that every sparse backend supports; unchanged when sparse attention is off.
/// Fails (no_common_block_size) when no size is supported by every sparse backend.
expected<int32_t>
resolve_sparse_block_size(bool enabled, int32_t manager_block_size,
                          const std::vector<const backend_capabilities*>& backends);

/// Kernel block size per KV cache group (index-aligned). Encoder-only groups get 0 ("none")
/// rather than being skipped, so later groups keep their index; state groups keep their own.
expected<std::vector<int32_t>>
kernel_block_sizes(const std::vector<kv_cache_group>& groups,
                   const std::vector<std::vector<attention_group>>& attn_groups,
                   const backend_registry& registry);

/// Weakest graph support over attention groups; with `checked`, groups sharing no layer with it
/// are skipped. Ties keep the first backend that reached the minimum.
graph_support_info attention_graph_support(const std::vector<std::vector<attention_group>>& groups,
                                           const backend_registry& registry,
                                           const std::set<std::string>* checked = nullptr);

/// The first backend (group order) that cannot tolerate a CPU/device query-length mismatch;
/// empty when all can.
std::string
query_lens_mismatch_unsupported_backend(const std::vector<std::vector<attention_group>>& groups,
                                        const backend_registry& registry,
                                        const std::set<std::string>* checked = nullptr);

} // namespace kvactor
