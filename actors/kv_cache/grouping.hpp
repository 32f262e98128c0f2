// Which layers share a block table: KV cache groups (docs/vllm-semantics.md §3.4).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "actors/kv_cache/layer_specs.hpp"
#include "messages/errc.hpp"
#include "messages/kv.hpp"

namespace kvactor {

struct grouping_options {
  /// Force one group for hybrid models (vLLM's --disable-hybrid-kv-cache-manager).
  bool disable_hybrid = false;
  /// vLLM disables the hybrid manager for models with chunked local attention (Llama 4) unless
  /// VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1; this is that switch.
  bool allow_chunked_local_hybrid = false;
};

struct grouping_result {
  std::vector<kv_cache_group> groups;
  std::vector<std::string> warnings; // padding layers, hybrid manager disabled …
};

/// Makes every page the same size: smaller state pages are padded; smaller attention pages grow
/// their block size when the largest page is a multiple, else (non-MLA) are padded.
/// Fails (unsupported) for an MLA page that does not divide the largest page.
expected<layer_spec_list> unify_page_sizes(layer_spec_list specs);

/// Groups layers: one group if all specs merge, one uniform-type group if only hidden sizes
/// differ, otherwise groups of equal page size and equal layer count (padding the last).
expected<grouping_result> kv_cache_groups(const layer_spec_list& specs,
                                          const grouping_options& opt = {});

/// Appends each KV-sharing layer (layer -> target, as shared_kv_cache_layers gives them) to the
/// group holding its target; fails (invalid_argument) when a target is in no group.
expected<std::vector<kv_cache_group>>
add_kv_sharing_layers(std::vector<kv_cache_group> groups,
                      const std::map<std::string, std::string>& shared);

} // namespace kvactor
