#include "actors/kv_cache/allocation.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "actors/kv_cache/grouping.hpp"
#include "actors/kv_cache/layout.hpp"

namespace kvactor {

namespace {

std::vector<kv_cache_group> encoder_only_groups(const layer_spec_list& specs) {
  std::vector<kv_cache_group> out;
  for (const auto& entry : specs) {
    const auto& name = entry.layer;
    const auto& spec = entry.spec; // not a structured binding: the lambda captures it (clang 14)
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const kv_cache_group& g) { return g.spec == spec; });
    if (it == out.end()) {
      out.push_back({{}, spec});
      it = std::prev(out.end());
    }
    it->layer_names.push_back(name);
  }
  return out;
}

} // namespace

expected<std::vector<kv_cache_group>> rank_groups(const kv_cache_config& config,
                                                  const std::vector<attention_layer>& layers,
                                                  const spec_options& opt) {
  auto groups = add_kv_sharing_layers(config.groups, shared_kv_cache_layers(layers));
  if (!groups) return groups;
  for (auto& g : encoder_only_groups(encoder_only_specs(layers, opt)))
    groups->push_back(std::move(g));
  return groups;
}

expected<std::vector<kv_cache_view>>
build_views(const kv_cache_config& config, const std::vector<kv_cache_group>& groups,
            const std::vector<int32_t>& kernel_block_sizes,
            const std::map<std::string, std::string>& sharing) {
  std::vector<kv_cache_view> views;
  for (const auto& t : config.tensors) {
    for (const auto& layer : t.layers) {
      auto g = std::find_if(groups.begin(), groups.end(), [&](const kv_cache_group& x) {
        return std::find(x.layer_names.begin(), x.layer_names.end(), layer) != x.layer_names.end();
      });
      if (g == groups.end())
        return make_error(errc::invalid_argument,
                          fmt::format("layer {}: has a tensor but no KV cache group", layer));
      const auto gid = static_cast<size_t>(g - groups.begin());
      const int32_t kbs = gid < kernel_block_sizes.size() ? kernel_block_sizes[gid] : 0;
      auto view =
          layer_view(t, layer, layer_spec_of(*g, layer), config.num_blocks, config.layout, kbs);
      if (!view) return view.err();
      views.push_back(std::move(*view));
    }
  }
  for (const auto& entry : sharing) {
    const auto& layer = entry.first;
    const auto& target = entry.second; // not a structured binding: the lambda captures it
    auto it = std::find_if(views.begin(), views.end(),
                           [&](const kv_cache_view& v) { return v.layer == target; });
    if (it == views.end()) continue;
    auto alias = *it;
    alias.layer = layer;
    views.push_back(std::move(alias));
  }
  return views;
}

namespace {

// The request may come from anywhere (an injected message): a block of no tokens would divide by
// zero in the specs.
status check_plan_request(const kv_plan_request& r) {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, std::move(what)); };
  if (r.block_size < 1)
    return bad(fmt::format("kv_plan_request.block_size: {} is not a positive number of tokens",
                           r.block_size));
  if (r.limits.max_model_len < 0)
    return bad(fmt::format("kv_plan_request.limits.max_model_len: {} is negative",
                           r.limits.max_model_len));
  if (r.available_bytes < 0)
    return bad(fmt::format("kv_plan_request.available_bytes: {} is negative", r.available_bytes));
  if (r.num_gpu_blocks_override < 0)
    return bad(fmt::format("kv_plan_request.num_gpu_blocks_override: {} is negative",
                           r.num_gpu_blocks_override));
  return ok();
}

} // namespace

expected<kv_local_plan> kv_cache_allocator::plan(const model_layout& model,
                                                 const kv_plan_request& request) {
  if (auto ok = check_plan_request(request); !ok) return ok.err();
  spec_options sopt;
  take<cache_settings>(sopt, request);
  sopt.max_model_len = request.limits.max_model_len;
  kv_plan_options kopt;
  kopt.limits = request.limits;
  take<cache_settings>(kopt, request);
  kopt.layout = request.layout;
  auto kv = plan_kv_cache({kv_cache_specs(model.layers, sopt)}, {request.available_bytes}, kopt);
  if (!kv) return kv.err();
  model_ = model;
  request_ = request;
  config_ = kv->per_rank.front();
  auto groups = rank_groups(config_, model.layers, sopt);
  if (!groups) return groups.err();
  groups_ = std::move(*groups);
  return kv_local_plan{config_, kv->available_per_rank.front(), kv->warnings};
}

expected<kv_allocation> kv_cache_allocator::allocate(int64_t num_blocks,
                                                     const std::vector<int32_t>& kbs) {
  if (num_blocks <= 0 || num_blocks > config_.num_blocks)
    return make_error(errc::invalid_argument,
                      fmt::format("num_blocks: {} is outside [1, {}] (the planned count)",
                                  num_blocks, config_.num_blocks));
  kv_plan_options opt;
  opt.layout = config_.layout;
  opt.num_gpu_blocks_override = num_blocks;
  config_ = kv_cache_config_from_groups(config_.groups, 0, opt);
  int64_t size = config_.tensors.empty() ? 0 : config_.tensors.front().size;
  bytes_ = (size + 4095) / 4096 * 4096;
  memory_.reset();
  if (bytes_ > 0) {
    auto memory = memory_factory_(bytes_);
    if (!memory)
      return make_error(
          memory.err().code,
          fmt::format("kv_cache: allocating {} blocks of {} bytes{} ({} bytes): {}", num_blocks,
                      bytes_per_block(config_.groups),
                      request_.num_gpu_blocks_override > 0 ? " (--num-gpu-blocks-override)" : "",
                      bytes_, memory.err().message));
    memory_ = std::move(*memory);
  }
  auto views = build_views(config_, groups_, kbs, shared_kv_cache_layers(model_.layers));
  if (!views) return views.err();
  kv_allocation out;
  out.buffer_handle = reinterpret_cast<uintptr_t>(base());
  out.num_blocks = num_blocks;
  out.bytes = bytes_;
  out.views = std::move(*views);
  return out;
}

std::vector<memory_entry> kv_cache_allocator::ledger() const {
  if (memory_ && std::string_view{memory_->where()} == "device")
    return {{"kv_cache (device)", bytes_}};
  return {{"kv_cache", bytes_}};
}

kv_memory_factory host_kv_memory() {
  struct host_memory final : kv_memory {
    explicit host_memory(int64_t bytes)
        : bytes(std::make_unique<std::byte[]>(static_cast<size_t>(bytes))) {}
    std::byte* data() const override { return bytes.get(); }
    const char* where() const override { return "host"; }
    std::unique_ptr<std::byte[]> bytes; // zero-filled
  };
  return [](int64_t bytes) -> expected<std::unique_ptr<kv_memory>> {
    try {
      return std::unique_ptr<kv_memory>(std::make_unique<host_memory>(bytes));
    } catch (const std::bad_alloc&) {
      return make_error(errc::insufficient_memory,
                        fmt::format("out of host memory for {} bytes", bytes));
    }
  };
}

} // namespace kvactor
