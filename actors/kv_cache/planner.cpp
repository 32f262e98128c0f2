#include "actors/kv_cache/planner.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "actors/kv_cache/layout.hpp"

namespace kvactor {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// "1.00 GiB" above a GiB, "2.01 MiB" below, as a person reads a budget.
std::string human(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / 1073741824.0);
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.2f} MiB", b / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

// Per-layer specs of a group: the wrapper's entries, or the group spec for every layer.
std::vector<kv_cache_spec> member_specs(const kv_cache_group& g) {
  if (g.spec.kind == kv_cache_spec_kind::uniform_type) return g.spec.layer_specs;
  return std::vector<kv_cache_spec>(g.layer_names.size(), g.spec);
}

int64_t group_blocks_per_request(const kv_cache_group& g, const memory_limits& lim) {
  return ceil_div(max_memory_usage_bytes(g.spec, lim), page_size_bytes(g.spec));
}

// Keeps only `names` in each group (positions preserved, possibly empty).
std::vector<kv_cache_group> project(const std::vector<kv_cache_group>& groups,
                                    const layer_spec_list& specs) {
  std::map<std::string, const kv_cache_spec*> mine;
  for (const auto& s : specs)
    mine.emplace(s.layer, &s.spec);
  std::vector<kv_cache_group> out;
  for (const auto& g : groups) {
    kv_cache_group p;
    p.spec = g.spec;
    if (g.spec.kind == kv_cache_spec_kind::uniform_type) {
      p.spec.layer_names.clear();
      p.spec.layer_specs.clear();
    }
    for (size_t i = 0; i < g.layer_names.size(); ++i) {
      if (mine.count(g.layer_names[i]) == 0) continue;
      p.layer_names.push_back(g.layer_names[i]);
      if (g.spec.kind == kv_cache_spec_kind::uniform_type) {
        p.spec.layer_names.push_back(g.spec.layer_names[i]);
        p.spec.layer_specs.push_back(g.spec.layer_specs[i]);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

} // namespace

int64_t bytes_per_block(const std::vector<kv_cache_group>& groups) {
  int64_t best = 0;
  for (const auto& g : groups) {
    int64_t sum = 0;
    for (const auto& s : member_specs(g))
      sum += page_size_bytes(s);
    best = std::max(best, sum);
  }
  return best;
}

int64_t blocks_per_request(const std::vector<kv_cache_group>& groups, const memory_limits& lim) {
  int64_t total = 0;
  for (const auto& g : groups)
    total += group_blocks_per_request(g, lim);
  return total;
}

int64_t max_memory_usage_from_groups(const std::vector<kv_cache_group>& groups,
                                     const memory_limits& lim) {
  return bytes_per_block(groups) * blocks_per_request(groups, lim);
}

int64_t estimate_max_model_len(const layer_spec_list& specs, const memory_limits& lim,
                               int64_t available) {
  auto fits = [&](int64_t len) {
    auto l = lim;
    l.max_model_len = len;
    int64_t need = 0;
    for (const auto& s : specs)
      need += max_memory_usage_bytes(s.spec, l);
    return need <= available;
  };
  if (lim.max_model_len < 1 || !fits(1)) return 0;
  int64_t lo = 1;
  int64_t hi = lim.max_model_len;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

kv_cache_config kv_cache_config_from_groups(const std::vector<kv_cache_group>& groups,
                                            int64_t available, const kv_plan_options& opt) {
  kv_cache_config cfg;
  cfg.layout = opt.layout;
  cfg.groups = groups;
  const int64_t per_block = bytes_per_block(groups);
  if (groups.empty() || per_block == 0) {
    cfg.num_blocks = 1; // the block pool still needs its null block
    return cfg;
  }
  cfg.num_blocks =
      opt.num_gpu_blocks_override > 0 ? opt.num_gpu_blocks_override : available / per_block;
  const int64_t size = per_block * cfg.num_blocks;
  for (const auto& g : groups) {
    // Buckets of identical per-layer specs, in layer order; every group starts at byte 0.
    auto specs = member_specs(g);
    std::vector<std::pair<kv_cache_spec, std::vector<std::string>>> buckets;
    for (size_t i = 0; i < specs.size(); ++i) {
      auto it = std::find_if(buckets.begin(), buckets.end(),
                             [&](const auto& b) { return b.first == specs[i]; });
      if (it == buckets.end()) {
        buckets.push_back({specs[i], {}});
        it = std::prev(buckets.end());
      }
      it->second.push_back(g.layer_names[i]);
    }
    int64_t byte_offset = 0;
    for (const auto& [spec, layers] : buckets) {
      const int64_t page = page_size_bytes(spec);
      const int64_t heads = is_attention_kind(spec.kind) ? spec.num_kv_heads : 1;
      const int64_t states =
          is_attention_kind(spec.kind) ? num_kernel_states(spec, spec.block_size) : 1;
      const int64_t content = is_attention_kind(spec.kind) ? state_content_size_bytes(spec)
                                                           : real_page_size_bytes(spec);
      dims5 sizes{static_cast<int64_t>(layers.size()), cfg.num_blocks, heads, states, content};
      dims5 fixed{};
      if (is_block_outermost(opt.layout)) fixed[dim_b] = per_block;
      auto strides = layout_strides(opt.layout, sizes, fixed, spec.page_size_padded);
      kv_cache_tensor t;
      t.size = size;
      t.layers = layers;
      t.layer_stride = strides[dim_l];
      t.block_stride = strides[dim_b];
      t.offset = byte_offset * std::max(t.layer_stride, page) / page;
      byte_offset += static_cast<int64_t>(layers.size()) * page;
      cfg.tensors.push_back(std::move(t));
    }
  }
  return cfg;
}

std::string grouped(int64_t v) {
  auto digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

kv_cache_capacity kv_capacity(const kv_cache_config& cfg, const memory_limits& lim) {
  kv_cache_capacity cap;
  const int64_t per_req = blocks_per_request(cfg.groups, lim);
  if (per_req == 0) return cap;
  cap.max_concurrency = static_cast<double>(cfg.num_blocks) / static_cast<double>(per_req);
  cap.tokens = static_cast<int64_t>(cap.max_concurrency * static_cast<double>(lim.max_model_len));
  return cap;
}

status check_enough_memory(const std::vector<kv_cache_group>& groups, const layer_spec_list& specs,
                           const memory_limits& lim, int64_t available) {
  if (groups.empty()) return ok();
  if (available <= 0)
    return make_error(errc::insufficient_memory,
                      fmt::format("kv_cache_memory: {} bytes leaves no memory for the cache "
                                  "blocks; give a positive budget with --kv-cache-memory or "
                                  "raise --gpu-memory-utilization",
                                  available));
  // Block 0 is the pool's permanently reserved null block.
  const int64_t block = bytes_per_block(groups);
  const int64_t usable = available - block;
  const int64_t needed = max_memory_usage_from_groups(groups, lim);
  if (needed <= usable) return ok();
  if (usable <= 0)
    return make_error(
        errc::insufficient_memory,
        fmt::format("kv_cache_memory: the available KV cache memory ({}, {} bytes) does not "
                    "hold even the null block ({}, {} bytes), let alone a request of the model's "
                    "max seq len ({}), which needs {} ({} bytes). Try increasing "
                    "--kv-cache-memory (or --gpu-memory-utilization).",
                    human(std::max<int64_t>(available, 0)), available, human(block), block,
                    lim.max_model_len, human(needed), needed));
  const int64_t fits = estimate_max_model_len(specs, lim, usable);
  return make_error(
      errc::insufficient_memory,
      fmt::format("kv_cache_memory: to serve at least one request with the model's max seq len "
                  "({}), {} ({} bytes) of KV cache is needed, which is larger than the "
                  "available KV cache memory ({}, {} bytes after reserving the null "
                  "block). Based on the available memory, the estimated maximum model length is "
                  "{}. Try increasing --kv-cache-memory (or --gpu-memory-utilization) or "
                  "decreasing --max-model-len.",
                  lim.max_model_len, human(needed), needed, human(usable), usable, fits));
}

expected<kv_plan> plan_kv_cache(const std::vector<layer_spec_list>& specs_per_rank,
                                const std::vector<int64_t>& available_per_rank,
                                const kv_plan_options& opt) {
  if (specs_per_rank.size() != available_per_rank.size())
    return make_error(errc::invalid_argument,
                      fmt::format("available memory: {} values for {} ranks",
                                  available_per_rank.size(), specs_per_rank.size()));
  if (specs_per_rank.empty())
    return make_error(errc::invalid_argument, "ranks: at least one rank is needed");
  // 1. One spec per layer name across ranks.
  layer_spec_list merged;
  std::map<std::string, std::pair<size_t, size_t>> seen; // name -> (rank, index in merged)
  for (size_t r = 0; r < specs_per_rank.size(); ++r) {
    for (const auto& s : specs_per_rank[r]) {
      auto it = seen.find(s.layer);
      if (it == seen.end()) {
        seen.emplace(s.layer, std::make_pair(r, merged.size()));
        merged.push_back(s);
      } else if (!(merged[it->second.second].spec == s.spec)) {
        return make_error(errc::incompatible_specs,
                          fmt::format("kv_cache_spec: layer {} has a different spec on rank {} "
                                      "than on rank {} (the spec is different across workers)",
                                      s.layer, r, it->second.first));
      }
    }
  }
  // 2. Global groups, projected onto each rank.
  auto grouping = kv_cache_groups(merged, opt.grouping);
  if (!grouping) return grouping.err();
  kv_plan plan;
  plan.global_groups = grouping->groups;
  plan.warnings = grouping->warnings;
  const int64_t per_block = bytes_per_block(plan.global_groups);
  for (size_t r = 0; r < specs_per_rank.size(); ++r) {
    auto groups = project(plan.global_groups, specs_per_rank[r]);
    int64_t avail = available_per_rank[r];
    if (opt.num_gpu_blocks_override > 0 && per_block > 0) {
      if (r == 0)
        plan.warnings.push_back(
            fmt::format("Overriding num_gpu_blocks={} with num_gpu_blocks_override={}",
                        avail / per_block, opt.num_gpu_blocks_override));
      avail = opt.num_gpu_blocks_override * per_block;
    }
    if (auto ok = check_enough_memory(groups, specs_per_rank[r], opt.limits, avail); !ok) {
      auto e = ok.err();
      // Sized by the override, the budget flags have nothing to do with it: name the override.
      if (opt.num_gpu_blocks_override > 0)
        e.message = fmt::format("--num-gpu-blocks-override {}: {} blocks of {} bytes; {}",
                                opt.num_gpu_blocks_override, opt.num_gpu_blocks_override, per_block,
                                e.message);
      if (specs_per_rank.size() > 1) e.message = fmt::format("rank {}: {}", r, e.message);
      return e;
    }
    plan.available_per_rank.push_back(avail);
    plan.per_rank.push_back(kv_cache_config_from_groups(groups, avail, opt));
    plan.planned_blocks.push_back(plan.per_rank.back().num_blocks);
  }
  // 3. Every rank allocates the smallest block count, so the scheduler sees one pool.
  const int64_t min_blocks =
      *std::min_element(plan.planned_blocks.begin(), plan.planned_blocks.end());
  for (size_t r = 0; r < plan.per_rank.size(); ++r) {
    if (plan.per_rank[r].num_blocks == min_blocks) continue;
    auto groups = plan.per_rank[r].groups;
    auto o = opt;
    o.num_gpu_blocks_override = 0;
    plan.per_rank[r] = kv_cache_config_from_groups(groups, min_blocks * bytes_per_block(groups), o);
  }
  return plan;
}

} // namespace kvactor
