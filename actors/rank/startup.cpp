#include "actors/rank/startup.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "actors/kv_cache/planner.hpp"

namespace kvactor {

namespace {

// A kernel view over `base` for one planned layer view.
expected<kernels::kv_view> kernel_view(std::byte* base, const kv_cache_view& v) {
  if (v.shape.size() != 4 || v.strides.size() != 4)
    return make_error(errc::invalid_argument,
                      fmt::format("view of {}: expected 4 dims, got {}", v.layer, v.shape.size()));
  kernels::kv_view out;
  out.base = base + v.offset_bytes;
  switch (v.element_type) {
  case dtype::float32: out.type = kernels::element_type::f32; break;
  case dtype::bfloat16: out.type = kernels::element_type::bf16; break;
  case dtype::float16: out.type = kernels::element_type::f16; break;
  // Scales of 1, vLLM's default for a checkpoint without k_scale / v_scale.
  case dtype::fp8_e4m3: out.type = kernels::element_type::fp8_e4m3; break;
  default:
    return make_error(errc::unsupported,
                      fmt::format("view of {}: the kernels store float32, bfloat16, float16 or "
                                  "fp8_e4m3, not {}",
                                  v.layer, to_string(v.element_type)));
  }
  out.num_blocks = v.shape[0];
  out.num_heads = static_cast<int32_t>(v.shape[1]);
  out.block_size = static_cast<int32_t>(v.shape[2]);
  out.content = static_cast<int32_t>(v.shape[3]);
  out.stride_block = v.strides[0];
  out.stride_head = v.strides[1];
  out.stride_token = v.strides[2];
  return out;
}

} // namespace

status check_communicator(const rank_config& cfg, int32_t comm_rank, int32_t comm_world) {
  if (cfg.tensor_parallel_size != comm_world)
    return make_error(errc::invalid_argument,
                      fmt::format("tensor_parallel_size: {} ranks, but this rank's communicator "
                                  "joins {}",
                                  cfg.tensor_parallel_size, comm_world));
  if (cfg.rank != comm_rank)
    return make_error(errc::invalid_argument,
                      fmt::format("rank: the driver configures rank {}, this rank's communicator "
                                  "holds rank {}",
                                  cfg.rank, comm_rank));
  return ok();
}

kv_plan_request kv_plan_request_for(const rank_config& cfg, const model_layout& model) {
  kv_plan_request req;
  req.limits.max_model_len =
      cfg.max_model_len > 0 ? cfg.max_model_len : model.max_position_embeddings;
  req.limits.max_in_flight_tokens = cfg.max_num_batched_tokens;
  req.limits.max_encoder_input_tokens = model.max_encoder_input_tokens;
  take<cache_settings>(req, cfg);
  req.available_bytes = cfg.kv_cache_memory;
  return req;
}

std::vector<std::string> kv_capacity_lines(const kv_cache_config& cfg, const memory_limits& lim,
                                           int64_t available_bytes, device_kind device) {
  const kv_cache_capacity cap = kv_capacity(cfg, lim);
  return {fmt::format("Available KV cache memory: {:.2f} GiB",
                      static_cast<double>(available_bytes) / static_cast<double>(int64_t{1} << 30)),
          fmt::format("{} KV cache size: {} tokens", device == device_kind::cuda ? "GPU" : "CPU",
                      grouped(cap.tokens)),
          fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                      grouped(lim.max_model_len), cap.max_concurrency)};
}

namespace {

int32_t group_of(const std::string& layer, const std::vector<kv_cache_group>& groups) {
  int32_t found = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& names = groups[g].layer_names;
    if (std::find(names.begin(), names.end(), layer) != names.end())
      found = static_cast<int32_t>(g); // the last group listing it, as the builders see it
  }
  return found;
}

} // namespace

expected<kv_binding> bind_layers(const model_layout& model,
                                 const std::vector<kv_cache_group>& groups,
                                 const std::vector<kv_cache_view>& views, std::byte* base) {
  kv_binding out;
  out.views.resize(model.layers.size());
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const auto& name = model.layers[l].name;
    out.layer_names.push_back(name);
    out.layer_group.push_back(group_of(name, groups));
    auto v = std::find_if(views.begin(), views.end(),
                          [&](const kv_cache_view& x) { return x.layer == name; });
    if (v == views.end()) continue;
    auto kv = kernel_view(base, *v);
    if (!kv) return kv.err();
    out.views[l] = *kv;
  }
  return out;
}

std::vector<group_geometry> group_geometries(const std::vector<kv_cache_group>& planned,
                                             const std::vector<int32_t>& kernel_block_sizes) {
  std::vector<group_geometry> out;
  for (size_t g = 0; g < planned.size(); ++g) {
    group_geometry geo;
    geo.block_size = planned[g].spec.block_size;
    geo.kernel_block_size = kernel_block_sizes[g] > 0 ? kernel_block_sizes[g] : geo.block_size;
    geo.positional = group_kind(planned[g].spec) != kv_cache_spec_kind::mamba;
    out.push_back(geo);
  }
  return out;
}

std::vector<std::vector<attention_group>>
builder_attention_groups(const backend_assignment& backends, size_t num_planned_groups) {
  const auto n = std::min(num_planned_groups, backends.attention_groups.size());
  return {backends.attention_groups.begin(),
          backends.attention_groups.begin() + static_cast<std::ptrdiff_t>(n)};
}

cudagraph_request cudagraph_request_for(const rank_config& cfg, const graph_support_info& support,
                                        int64_t num_blocks, bool gpu) {
  cudagraph_request gr;
  gr.requested = cfg.cudagraph;
  gr.support = support;
  take<scheduler_limits>(gr, cfg);
  gr.capture_sizes = cfg.cudagraph_capture_sizes;
  gr.num_blocks = num_blocks;
  gr.gpu = gpu;
  gr.lazy = cfg.cudagraph_lazy;
  gr.memory_cap = cfg.cudagraph_memory;
  return gr;
}

graph_setup graph_setup_for(const cudagraph_plan& plan, const std::vector<int32_t>& layer_group,
                            int32_t max_num_seqs, const std::vector<int32_t>& widths) {
  graph_setup setup;
  setup.layer_group = layer_group;
  setup.max_reqs = max_num_seqs;
  setup.max_tokens = plan.capture_sizes.back();
  for (int32_t w : widths)
    setup.max_width = std::max(setup.max_width, w);
  return setup;
}

} // namespace kvactor
