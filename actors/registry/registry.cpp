#include "actors/registry/registry.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "actors/registry/catalog.hpp"

namespace kvactor {

namespace {

bool supports(const backend_capabilities& b, int32_t size) {
  if (b.kernel_block_sizes.empty()) return true;
  return std::any_of(b.kernel_block_sizes.begin(), b.kernel_block_sizes.end(),
                     [&](const block_size_constraint& c) {
                       return c.multiple_of ? size % c.value == 0 : size == c.value;
                     });
}

bool touches(const attention_group& g, const std::set<std::string>* checked) {
  if (checked == nullptr) return true;
  return std::any_of(g.layer_names.begin(), g.layer_names.end(),
                     [&](const std::string& n) { return checked->count(n) > 0; });
}

} // namespace

backend_registry backend_registry::with_builtins() {
  backend_registry r;
  for (auto& b : builtin_backends())
    (void)r.add(std::move(b));
  return r;
}

status backend_registry::add(backend_capabilities caps) {
  if (caps.name.empty())
    return make_error(errc::invalid_argument, "backend name: must not be empty");
  if (find(caps.name) != nullptr)
    return make_error(errc::invalid_argument,
                      fmt::format("backend name: '{}' is already registered", caps.name));
  for (const auto& c : caps.kernel_block_sizes)
    if (c.value <= 0)
      return make_error(errc::invalid_argument,
                        fmt::format("kernel_block_sizes of backend '{}': {} is not positive",
                                    caps.name, c.value));
  backends_.push_back(std::move(caps));
  return ok();
}

const backend_capabilities* backend_registry::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<std::string> backend_registry::names() const {
  std::vector<std::string> out;
  for (const auto& b : backends_)
    out.push_back(b.name);
  return out;
}

std::string backend_registry::veto(const backend_capabilities& b, const attention_layer& layer,
                                   const kv_cache_spec& spec, device_kind device) {
  if (b.requires_gpu && device == device_kind::cpu) return "it needs a GPU";
  if (std::find(b.spec_kinds.begin(), b.spec_kinds.end(), spec.kind) == b.spec_kinds.end())
    return fmt::format("it does not serve {} layers", to_string(spec.kind));
  if (is_attention_kind(spec.kind)) {
    if (!b.kv_dtypes.empty()
        && std::find(b.kv_dtypes.begin(), b.kv_dtypes.end(), spec.kv_dtype) == b.kv_dtypes.end())
      return fmt::format("it does not support KV cache dtype {}", to_string(spec.kv_dtype));
    if (!b.head_sizes.empty()
        && std::find(b.head_sizes.begin(), b.head_sizes.end(), spec.head_size)
               == b.head_sizes.end())
      return fmt::format("it does not support head size {}", spec.head_size);
  }
  if (layer.has_sinks && !b.supports_sinks) return "it does not support attention sinks";
  return {};
}

expected<std::string> backend_registry::resolve(const attention_layer& layer,
                                                const kv_cache_spec& spec, device_kind device,
                                                std::string_view preferred) const {
  if (!preferred.empty() && preferred != "auto") {
    const auto* b = find(preferred);
    if (b == nullptr)
      return make_error(errc::invalid_argument,
                        fmt::format("--attention-backend: unknown backend '{}' (known: {})",
                                    preferred, fmt::join(names(), ", ")));
    // A preferred attention backend does not apply to state layers.
    if (spec.kind != kv_cache_spec_kind::mamba || b->spec_kinds == std::vector{spec.kind}) {
      auto why = veto(*b, layer, spec, device);
      if (!why.empty())
        return make_error(errc::unsupported,
                          fmt::format("--attention-backend: '{}' cannot serve layer {}: {}",
                                      preferred, layer.name, why));
      return b->name;
    }
  }
  const backend_capabilities* best = nullptr;
  std::vector<std::string> reasons;
  for (const auto& b : backends_) {
    auto why = veto(b, layer, spec, device);
    if (!why.empty()) {
      reasons.push_back(fmt::format("{}: {}", b.name, why));
      continue;
    }
    if (best == nullptr || b.priority > best->priority) best = &b;
  }
  if (best == nullptr)
    return make_error(errc::unsupported,
                      fmt::format("layer {}: no backend can serve a {} layer on {} ({})",
                                  layer.name, to_string(spec.kind), to_string(device),
                                  fmt::join(reasons, "; ")));
  return best->name;
}

expected<std::vector<std::vector<attention_group>>>
build_attention_groups(const std::vector<kv_cache_group>& groups,
                       const std::map<std::string, layer_binding>& bindings) {
  std::vector<std::vector<attention_group>> out;
  for (size_t gid = 0; gid < groups.size(); ++gid) {
    const auto& g = groups[gid];
    std::vector<attention_group> list;
    for (const auto& name : g.layer_names) {
      auto b = bindings.find(name);
      if (b == bindings.end())
        return make_error(errc::invalid_argument,
                          fmt::format("layer {}: no backend was resolved for it", name));
      // KV-sharing layers are not in a wrapper: they read their target's pages.
      const kv_cache_spec& spec = layer_spec_of(g, name);
      auto it = std::find_if(list.begin(), list.end(), [&](const attention_group& a) {
        return a.backend == b->second.backend && a.spec == spec
               && a.num_heads_q == b->second.num_heads_q;
      });
      if (it == list.end()) {
        list.push_back(
            {b->second.backend, {}, spec, static_cast<int32_t>(gid), b->second.num_heads_q});
        it = std::prev(list.end());
      }
      it->layer_names.push_back(name);
    }
    out.push_back(std::move(list));
  }
  return out;
}

expected<int32_t>
select_common_block_size(int32_t manager_bs,
                         const std::vector<const backend_capabilities*>& backends) {
  if (backends.empty()) return manager_bs;
  auto all_support = [&](int32_t s) {
    return std::all_of(backends.begin(), backends.end(),
                       [&](const backend_capabilities* b) { return supports(*b, s); });
  };
  if (all_support(manager_bs)) return manager_bs;
  std::set<int32_t, std::greater<>> exact;
  for (const auto* b : backends)
    for (const auto& c : b->kernel_block_sizes)
      if (!c.multiple_of) exact.insert(c.value);
  for (auto s : exact)
    if (manager_bs % s == 0 && all_support(s)) return s;
  std::vector<std::string> names;
  for (const auto* b : backends)
    names.push_back(b->name);
  return make_error(errc::no_common_block_size,
                    fmt::format("--block-size: no common kernel block size for {} (backends: "
                                "{}); choose a block size every backend supports",
                                manager_bs, fmt::join(names, ", ")));
}

expected<int32_t>
resolve_sparse_block_size(bool enabled, int32_t manager_bs,
                          const std::vector<const backend_capabilities*>& backends) {
  if (!enabled || backends.empty()) return manager_bs;
  for (int32_t s = manager_bs; s >= 1; --s) {
    if (manager_bs % s != 0) continue;
    if (std::all_of(backends.begin(), backends.end(),
                    [&](const backend_capabilities* b) { return supports(*b, s); }))
      return s;
  }
  std::vector<std::string> names;
  for (const auto* b : backends)
    names.push_back(b->name);
  return make_error(errc::no_common_block_size,
                    fmt::format("--block-size: no block size dividing {} is supported by every "
                                "sparse backend ({})",
                                manager_bs, fmt::join(names, ", ")));
}

expected<std::vector<int32_t>>
kernel_block_sizes(const std::vector<kv_cache_group>& groups,
                   const std::vector<std::vector<attention_group>>& attn_groups,
                   const backend_registry& registry) {
  std::vector<int32_t> out;
  for (size_t gid = 0; gid < groups.size(); ++gid) {
    const auto& g = groups[gid];
    auto kind = group_kind(g.spec);
    if (kind == kv_cache_spec_kind::encoder_only) {
      out.push_back(0);
      continue;
    }
    if (kind == kv_cache_spec_kind::mamba) {
      out.push_back(g.spec.block_size);
      continue;
    }
    std::vector<const backend_capabilities*> backends;
    if (gid < attn_groups.size())
      for (const auto& a : attn_groups[gid])
        if (const auto* b = registry.find(a.backend);
            b != nullptr && std::find(backends.begin(), backends.end(), b) == backends.end())
          backends.push_back(b);
    auto s = select_common_block_size(g.spec.block_size, backends);
    if (!s) return s.err();
    out.push_back(*s);
  }
  return out;
}

graph_support_info attention_graph_support(const std::vector<std::vector<attention_group>>& groups,
                                           const backend_registry& registry,
                                           const std::set<std::string>* checked) {
  graph_support_info info;
  for (const auto& list : groups)
    for (const auto& g : list) {
      if (!touches(g, checked)) continue;
      const auto* b = registry.find(g.backend);
      info = info.narrow(b != nullptr ? b->cudagraph_support : graph_support::never, g.backend);
    }
  return info;
}

std::string
query_lens_mismatch_unsupported_backend(const std::vector<std::vector<attention_group>>& groups,
                                        const backend_registry& registry,
                                        const std::set<std::string>* checked) {
  for (const auto& list : groups)
    for (const auto& g : list) {
      if (!touches(g, checked)) continue;
      const auto* b = registry.find(g.backend);
      if (b == nullptr || !b->query_lens_mismatch_ok) return g.backend;
    }
  return {};
}

} // namespace kvactor
