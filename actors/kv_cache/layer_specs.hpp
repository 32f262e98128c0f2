// From a rank's layers to the KV cache spec of each layer (docs/vllm-semantics.md §1.3–1.5).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "messages/engine_config.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"

namespace kvactor {

/// One layer's spec, in registration order.
struct named_spec {
  std::string layer;
  kv_cache_spec spec;

  bool operator==(const named_spec&) const = default;
};
using layer_spec_list = std::vector<named_spec>;

/// block_size: the manager's; max_model_len: Mamba state blocks span a whole request.
struct spec_options : cache_settings, scheduler_limits {};

/// The spec a layer would need, ignoring KV sharing. Encoder-only layers get an encoder_only
/// spec (no memory); callers decide whether to plan memory for it.
kv_cache_spec spec_for_layer(const attention_layer& layer, const spec_options& opt);

/// Specs of the layers that own a KV cache: layers that share another layer's cache and
/// encoder-only layers are skipped. In hybrid attention + state models the attention block
/// size grows (in multiples of `block_size`) until an attention page holds a state page, and
/// state pages are padded to the attention page, so one pool can serve both (vLLM does the same
/// when it verifies hybrid configs).
layer_spec_list kv_cache_specs(const std::vector<attention_layer>& layers, const spec_options& opt);

/// Encoder-only layers (they need metadata and a backend, but no memory).
layer_spec_list encoder_only_specs(const std::vector<attention_layer>& layers,
                                   const spec_options& opt);

/// layer → the layer whose cache it reuses.
std::map<std::string, std::string>
shared_kv_cache_layers(const std::vector<attention_layer>& layers);

/// The trailing run of KV-sharing layers (walking backwards, skipping draft layers), which may
/// skip computing tokens that no later layer reads (YOCO-style fast prefill). Empty when off.
std::set<std::string> fast_prefill_eligible_layers(const std::vector<attention_layer>& layers,
                                                   bool enabled,
                                                   const std::set<std::string>& draft_layers = {});

} // namespace kvactor
