#include "deploy/plan_report.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "messages/byte_size.hpp"

namespace kvactor {

namespace {

using json = nlohmann::ordered_json;

std::map<std::string, int32_t> layer_indices(const deployment_plan& plan) {
  std::map<std::string, int32_t> out;
  for (const auto& l : plan.ranks.front().layers)
    out.emplace(l.name, l.index);
  return out;
}

std::vector<int32_t> indices_of(const kv_cache_group& g,
                                const std::map<std::string, int32_t>& idx) {
  std::vector<int32_t> out;
  for (const auto& n : g.layer_names)
    if (auto it = idx.find(n); it != idx.end()) out.push_back(it->second);
  return out;
}

std::string group_backends(const deployment_plan& plan, size_t gid) {
  std::vector<std::string> names;
  if (gid < plan.attention_groups.size())
    for (const auto& a : plan.attention_groups[gid])
      if (std::find(names.begin(), names.end(), a.backend) == names.end())
        names.push_back(a.backend);
  return fmt::format("{}", fmt::join(names, ","));
}

int32_t window_of(const kv_cache_spec& s) {
  if (s.kind == kv_cache_spec_kind::uniform_type && !s.layer_specs.empty())
    return s.layer_specs.front().sliding_window;
  return s.sliding_window;
}

std::string kind_name(const kv_cache_spec& s) {
  auto k = group_kind(s);
  switch (k) {
  case kv_cache_spec_kind::sink_full: return "full";
  case kv_cache_spec_kind::sliding_window_mla: return "sliding_window";
  default: return std::string{to_string(k)};
  }
}

json descriptor_json(const batch_descriptor& d, bool with_reqs) {
  json j;
  j["num_tokens"] = d.num_tokens;
  if (with_reqs) j["num_reqs"] = d.num_reqs;
  if (d.uniform_token_count > 0) j["uniform_token_count"] = d.uniform_token_count;
  return j;
}

} // namespace

std::string format_index_list(const std::vector<int32_t>& v) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1)
      ++j;
    if (j - i >= 2)
      parts.push_back(fmt::format("{}-{}", v[i], v[j]));
    else
      for (size_t k = i; k <= j; ++k)
        parts.push_back(std::to_string(v[k]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

std::string capacity_line(const deployment_plan& plan) {
  return fmt::format("GPU KV cache size: {} tokens, Maximum concurrency for {} tokens per "
                     "request: {:.2f}x",
                     grouped(plan.capacity.tokens), grouped(plan.limits.max_model_len),
                     plan.capacity.max_concurrency);
}

namespace {

// The plan's headline figures, as the top-level fields of the JSON object.
void summary_json(const deployment_plan& plan, json& j) {
  const auto& model = plan.ranks.front();
  j["schema"] = plan_schema;
  j["model"] = plan.request.model;
  j["model_path"] = plan.model_path;
  j["model_type"] = model.model_type;
  j["tensor_parallel_size"] = model.tensor_parallel_size;
  j["device"] = std::string{to_string(plan.request.device)};
  j["dtype"] = std::string{to_string(model.model_dtype)};
  j["num_blocks"] = plan.config.num_blocks;
  j["block_size"] = attention_block_size(plan);
  j["bytes_per_block"] = plan.bytes_per_block;
  j["kv_cache_tokens"] = plan.capacity.tokens;
  j["max_concurrency"] = plan.capacity.max_concurrency;
  j["max_model_len"] = plan.limits.max_model_len;
  j["max_num_seqs"] = plan.request.max_num_seqs;
  j["max_num_batched_tokens"] = plan.request.max_num_batched_tokens;
  j["layout"] = std::string{to_string(plan.config.layout)};
}

json group_json(const deployment_plan& plan, size_t gid,
                const std::map<std::string, int32_t>& idx) {
  const auto& g = plan.groups[gid];
  json jg;
  jg["id"] = gid;
  jg["kind"] = kind_name(g.spec);
  jg["layers"] = indices_of(g, idx);
  jg["layer_names"] = g.layer_names;
  jg["block_size"] = g.spec.block_size;
  auto kbs = plan.kernel_block_sizes.at(gid);
  jg["kernel_block_size"] = kbs > 0 ? json(kbs) : json(nullptr);
  jg["page_size_bytes"] = page_size_bytes(g.spec);
  auto w = window_of(g.spec);
  jg["sliding_window"] = w > 0 ? json(w) : json(nullptr);
  if (g.spec.attention_chunk_size > 0) jg["attention_chunk_size"] = g.spec.attention_chunk_size;
  jg["dtype"] = std::string{to_string(g.spec.kind == kv_cache_spec_kind::uniform_type
                                          ? g.spec.layer_specs.front().kv_dtype
                                          : g.spec.kv_dtype)};
  jg["backend"] = group_backends(plan, gid);
  jg["blocks_per_request"] =
      (page_size_bytes(g.spec) > 0)
          ? (max_memory_usage_bytes(g.spec, plan.limits) + page_size_bytes(g.spec) - 1)
                / page_size_bytes(g.spec)
          : 0;
  return jg;
}

// KV cache groups, attention groups, the backing tensors, per-layer views and KV sharing.
void layout_json(const deployment_plan& plan, json& j) {
  const auto idx = layer_indices(plan);
  json groups = json::array();
  for (size_t gid = 0; gid < plan.groups.size(); ++gid)
    groups.push_back(group_json(plan, gid, idx));
  j["groups"] = std::move(groups);
  json attn = json::array();
  for (const auto& list : plan.attention_groups)
    for (const auto& a : list)
      attn.push_back({{"kv_cache_group", a.kv_cache_group_id},
                      {"backend", a.backend},
                      {"num_heads_q", a.num_heads_q},
                      {"layer_names", a.layer_names}});
  j["attention_groups"] = std::move(attn);
  json tensors = json::array();
  for (const auto& t : plan.config.tensors)
    tensors.push_back({{"size_bytes", t.size},
                       {"layers", t.layers},
                       {"layer_stride", t.layer_stride},
                       {"block_stride", t.block_stride},
                       {"offset", t.offset}});
  j["tensors"] = std::move(tensors);
  json views = json::array();
  for (const auto& v : plan.views)
    views.push_back({{"layer", v.layer},
                     {"dtype", std::string{to_string(v.element_type)}},
                     {"shape", v.shape},
                     {"strides", v.strides},
                     {"offset_bytes", v.offset_bytes}});
  j["views"] = std::move(views);
  json sharing = json::object();
  for (const auto& [layer, target] : plan.kv_sharing)
    sharing[layer] = target;
  j["kv_sharing"] = std::move(sharing);
  j["fast_prefill_layers"] = plan.fast_prefill_layers;
}

json cudagraph_json(const deployment_plan& plan) {
  const auto& cg = plan.cudagraphs;
  json jc;
  jc["requested_mode"] = std::string{to_string(cg.requested)};
  jc["mode"] = std::string{to_string(cg.mode)};
  jc["min_graph_support"] = std::string{to_string(cg.support.min_support)};
  jc["min_graph_support_backend"] =
      cg.support.backend.empty() ? json(nullptr) : json(cg.support.backend);
  jc["query_lens_mismatch_backend"] = plan.query_lens_mismatch_backend.empty()
                                          ? json(nullptr)
                                          : json(plan.query_lens_mismatch_backend);
  jc["capture_sizes"] = cg.capture_sizes;
  json full = json::array();
  for (const auto& d : cg.full_graphs)
    full.push_back(descriptor_json(d, true));
  jc["full_graphs"] = std::move(full);
  json piecewise = json::array();
  for (const auto& d : cg.piecewise_graphs)
    piecewise.push_back(descriptor_json(d, false));
  jc["piecewise_graphs"] = std::move(piecewise);
  jc["notes"] = cg.notes;
  return jc;
}

json ranks_json(const deployment_plan& plan) {
  json ranks = json::array();
  for (const auto& r : plan.per_rank)
    ranks.push_back({{"rank", r.rank},
                     {"num_heads", r.num_heads},
                     {"num_kv_heads", r.num_kv_heads},
                     {"available_bytes", r.available_bytes},
                     {"planned_blocks", r.planned_blocks},
                     {"num_blocks", r.num_blocks}});
  return ranks;
}

} // namespace

json plan_to_json(const deployment_plan& plan) {
  json j;
  summary_json(plan, j);
  layout_json(plan, j);
  j["cudagraph"] = cudagraph_json(plan);
  j["per_rank"] = ranks_json(plan);
  j["warnings"] = plan.warnings;
  return j;
}

void print_plan(const deployment_plan& plan, std::ostream& out) {
  const auto& model = plan.ranks.front();
  const auto idx = layer_indices(plan);
  const auto& req = plan.request;
  fmt::print(out, "kvactor plan: {} ({}), {} layers, tensor parallel {}, {}\n", req.model,
             model.model_type, model.layers.size(), model.tensor_parallel_size,
             to_string(req.device));
  fmt::print(out, "  config            {}\n", plan.model_path);
  fmt::print(out, "  max_model_len     {}   max_num_seqs {}   max_num_batched_tokens {}\n",
             grouped(plan.limits.max_model_len), req.max_num_seqs, req.max_num_batched_tokens);
  fmt::print(out, "  blocks            {} x {} bytes ({}) = {}, layout {}\n",
             grouped(plan.config.num_blocks), grouped(plan.bytes_per_block),
             format_bytes(plan.bytes_per_block),
             format_bytes(plan.bytes_per_block * plan.config.num_blocks),
             to_string(plan.config.layout));
  fmt::print(out, "\nKV cache groups\n");
  fmt::print(out, "  {:>3}  {:<15} {:<22} {:>6} {:>7} {:>12} {:>7} {:>9}  {}\n", "id", "kind",
             "layers", "block", "kernel", "page bytes", "window", "blk/req", "backend");
  for (size_t gid = 0; gid < plan.groups.size(); ++gid) {
    const auto& g = plan.groups[gid];
    auto list = format_index_list(indices_of(g, idx));
    if (list.size() > 16) list = list.substr(0, 13) + "...";
    list += fmt::format(" ({})", g.layer_names.size());
    auto kbs = plan.kernel_block_sizes.at(gid);
    auto w = window_of(g.spec);
    const int64_t page = page_size_bytes(g.spec);
    const int64_t per_req =
        page > 0 ? (max_memory_usage_bytes(g.spec, plan.limits) + page - 1) / page : 0;
    fmt::print(out, "  {:>3}  {:<15} {:<22} {:>6} {:>7} {:>12} {:>7} {:>9}  {}\n", gid,
               kind_name(g.spec), list, g.spec.block_size, kbs > 0 ? std::to_string(kbs) : "-",
               grouped(page), w > 0 ? std::to_string(w) : "-", grouped(per_req),
               group_backends(plan, gid));
  }
  if (!plan.kv_sharing.empty())
    fmt::print(out, "  {} layers share another layer's KV cache\n", plan.kv_sharing.size());
  fmt::print(out, "\nRanks\n");
  fmt::print(out, "  {:>4} {:>6} {:>9} {:>18} {:>10} {:>10}\n", "rank", "heads", "kv_heads",
             "available bytes", "planned", "blocks");
  for (const auto& r : plan.per_rank)
    fmt::print(out, "  {:>4} {:>6} {:>9} {:>18} {:>10} {:>10}\n", r.rank, r.num_heads,
               r.num_kv_heads, grouped(r.available_bytes), grouped(r.planned_blocks),
               grouped(r.num_blocks));
  const auto& cg = plan.cudagraphs;
  fmt::print(out, "\nCUDA graphs: {} (requested {}; weakest support {}{})\n", to_string(cg.mode),
             to_string(cg.requested), to_string(cg.support.min_support),
             cg.support.backend.empty() ? "" : " from " + cg.support.backend);
  if (!cg.capture_sizes.empty())
    fmt::print(out, "  {} capture sizes {}..{}; {} full graphs, {} piecewise graphs\n",
               cg.capture_sizes.size(), cg.capture_sizes.front(), cg.capture_sizes.back(),
               cg.full_graphs.size(), cg.piecewise_graphs.size());
  for (const auto& n : cg.notes)
    fmt::print(out, "  note: {}\n", n);
  for (const auto& w : plan.warnings)
    fmt::print(out, "warning: {}\n", w);
  fmt::print(out, "\n");
  if (plan.config.groups.empty())
    fmt::print(out, "No KV cache needed: the model has no layers that keep KV state.\n");
  else
    fmt::print(out, "{}\n", capacity_line(plan));
}

} // namespace kvactor
