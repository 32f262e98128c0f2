#include "actors/registry/assignment.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace kvactor {

expected<backend_assignment> assign_backends(const backend_registry& registry,
                                             const model_layout& model,
                                             const std::vector<kv_cache_group>& groups,
                                             device_kind device, const std::string& preferred) {
  std::map<std::string, layer_binding> bindings;
  for (const auto& g : groups)
    for (const auto& name : g.layer_names) {
      auto layer = std::find_if(model.layers.begin(), model.layers.end(),
                                [&](const attention_layer& l) { return l.name == name; });
      if (layer == model.layers.end())
        return make_error(errc::invalid_argument,
                          fmt::format("layer {}: in a KV cache group but not in the model", name));
      auto backend = registry.resolve(*layer, layer_spec_of(g, name), device, preferred);
      if (!backend) return backend.err();
      bindings[name] = {*backend, layer->num_heads};
    }
  backend_assignment out;
  auto attn = build_attention_groups(groups, bindings);
  if (!attn) return attn.err();
  out.attention_groups = std::move(*attn);
  auto kbs = kernel_block_sizes(groups, out.attention_groups, registry);
  if (!kbs) return kbs.err();
  out.kernel_block_sizes = std::move(*kbs);
  out.support = attention_graph_support(out.attention_groups, registry);
  out.query_lens_mismatch_backend =
      query_lens_mismatch_unsupported_backend(out.attention_groups, registry);
  return out;
}

} // namespace kvactor
