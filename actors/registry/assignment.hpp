// The registry's whole answer for one rank, as a plain function: backend per layer, attention
// groups, kernel block sizes, weakest graph support (docs/vllm-semantics.md §1.6 phases 1–3
// without builders).
#pragma once

#include <string>
#include <vector>

#include "actors/registry/registry.hpp"
#include "messages/layer.hpp"
#include "messages/runtime.hpp"

namespace kvactor {

/// `groups` are the KV cache groups as the rank sees them (KV-sharing layers appended to their
/// target's group, encoder-only groups included). `preferred` is "auto" or a backend name.
expected<backend_assignment> assign_backends(const backend_registry& registry,
                                             const model_layout& model,
                                             const std::vector<kv_cache_group>& groups,
                                             device_kind device, const std::string& preferred);

} // namespace kvactor
