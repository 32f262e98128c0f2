#include "actors/kv_cache/grouping.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvactor {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

std::vector<kv_cache_spec> specs_of(const layer_spec_list& specs) {
  std::vector<kv_cache_spec> out;
  out.reserve(specs.size());
  for (const auto& s : specs)
    out.push_back(s.spec);
  return out;
}

std::vector<std::string> names_of(const layer_spec_list& specs) {
  std::vector<std::string> out;
  out.reserve(specs.size());
  for (const auto& s : specs)
    out.push_back(s.layer);
  return out;
}

// With the hybrid manager disabled, windowed kinds fall back to full attention that keeps its
// window, so that one group (and one block table) serves all layers.
layer_spec_list unify_hybrid(layer_spec_list specs) {
  bool has_full = std::any_of(specs.begin(), specs.end(), [](const named_spec& s) {
    return s.spec.kind == kv_cache_spec_kind::full || s.spec.kind == kv_cache_spec_kind::mla;
  });
  if (!has_full) return specs;
  for (auto& [name, s] : specs) {
    if (s.kind == kv_cache_spec_kind::sliding_window || s.kind == kv_cache_spec_kind::chunked_local)
      s.kind = kv_cache_spec_kind::full;
    else if (s.kind == kv_cache_spec_kind::sliding_window_mla) {
      s.kind = kv_cache_spec_kind::mla;
      s.sliding_window = 0;
    }
  }
  return specs;
}

struct bucket {
  kv_cache_spec spec; // merged representative
  std::vector<std::string> layers;
  std::vector<kv_cache_spec> layer_specs;
};

// Identical specs first (registration order), then buckets whose specs merge (full attention
// differing only in window) are folded together.
std::vector<bucket> bucket_layers(const layer_spec_list& specs) {
  std::vector<bucket> exact;
  for (const auto& entry : specs) {
    const auto& name = entry.layer;
    const auto& s = entry.spec; // not a structured binding: lambdas capture it (clang 14)
    auto it =
        std::find_if(exact.begin(), exact.end(), [&](const bucket& b) { return b.spec == s; });
    if (it == exact.end()) {
      exact.push_back({s, {}, {}});
      it = std::prev(exact.end());
    }
    it->layers.push_back(name);
    it->layer_specs.push_back(s);
  }
  std::vector<bucket> merged;
  for (auto& b : exact) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const bucket& m) {
      return static_cast<bool>(merge_specs({m.spec, b.spec}));
    });
    if (it == merged.end()) {
      merged.push_back(std::move(b));
      continue;
    }
    it->spec = *merge_specs({it->spec, b.spec});
    it->layers.insert(it->layers.end(), b.layers.begin(), b.layers.end());
    it->layer_specs.insert(it->layer_specs.end(), b.layer_specs.begin(), b.layer_specs.end());
  }
  return merged;
}

} // namespace

expected<layer_spec_list> unify_page_sizes(layer_spec_list specs) {
  int64_t max_page = 0;
  for (const auto& s : specs)
    max_page = std::max(max_page, page_size_bytes(s.spec));
  for (auto& [name, s] : specs) {
    int64_t page = page_size_bytes(s);
    if (page == max_page) continue;
    if (s.kind == kv_cache_spec_kind::mamba) {
      s.page_size_padded = max_page;
    } else if (max_page % page == 0) {
      s.block_size = static_cast<int32_t>(s.block_size * (max_page / page));
    } else if (!is_mla_kind(s.kind)) {
      s.page_size_padded = max_page;
    } else {
      return make_error(errc::unsupported,
                        fmt::format("page_size_bytes: MLA layer {} has a page of {} bytes, which "
                                    "does not divide the largest page ({} bytes)",
                                    name, page, max_page));
    }
  }
  return specs;
}

expected<grouping_result> kv_cache_groups(const layer_spec_list& input,
                                          const grouping_options& opt) {
  grouping_result out;
  layer_spec_list specs = input;
  if (specs.empty()) return out;
  const bool chunked = std::any_of(specs.begin(), specs.end(), [](const auto& s) {
    return s.spec.kind == kv_cache_spec_kind::chunked_local;
  });
  if (opt.disable_hybrid || (chunked && !opt.allow_chunked_local_hybrid)) {
    if (!is_uniform(specs_of(specs))) {
      out.warnings.push_back(
          opt.disable_hybrid
              ? "Hybrid KV cache manager is disabled for this hybrid model: sliding window and "
                "chunked layers keep full-length caches"
              : "Hybrid KV cache manager is disabled for chunked local attention, as vLLM does "
                "unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: chunked layers keep "
                "full-length caches (plan --allow-chunked-local-attn-with-hybrid-kv-cache plans "
                "the hybrid groups)");
      specs = unify_hybrid(std::move(specs));
    }
    auto merged = merge_specs(specs_of(specs));
    if (!merged)
      return make_error(errc::incompatible_specs,
                        "--disable-hybrid-kv-cache-manager: the layers cannot share one group: "
                            + merged.err().message);
    out.groups.push_back({names_of(specs), *merged});
    return out;
  }
  if (auto merged = merge_specs(specs_of(specs))) {
    out.groups.push_back({names_of(specs), *merged});
    return out;
  }
  if (auto wrapper = uniform_type_from_specs(names_of(specs), specs_of(specs))) {
    out.groups.push_back({names_of(specs), *wrapper});
    return out;
  }
  auto unified = unify_page_sizes(std::move(specs));
  if (!unified) return unified.err();
  auto buckets = bucket_layers(*unified);
  size_t min_n = buckets.front().layers.size();
  size_t max_n = min_n;
  for (const auto& b : buckets) {
    min_n = std::min(min_n, b.layers.size());
    max_n = std::max(max_n, b.layers.size());
  }
  // Groups of min_n layers waste nothing in the smallest bucket; if the largest bucket is
  // close in size, one group per bucket wastes less than splitting it.
  size_t group_size = (2 * max_n < 3 * min_n) ? max_n : min_n;
  for (const auto& b : buckets) {
    const size_t n = b.layers.size();
    const size_t k = static_cast<size_t>(ceil_div(static_cast<int64_t>(n), group_size));
    if (n % group_size != 0) {
      size_t pad = group_size - n % group_size;
      out.warnings.push_back(
          fmt::format("Add {} padding layers, may waste at most {:.2f}% KV cache memory", pad,
                      100.0 * static_cast<double>(pad) / static_cast<double>(n)));
    }
    // Strided so that pipeline stages (contiguous layer ranges) split evenly.
    for (size_t i = 0; i < k; ++i) {
      kv_cache_group g;
      std::vector<kv_cache_spec> member_specs;
      for (size_t j = i; j < n; j += k) {
        g.layer_names.push_back(b.layers[j]);
        member_specs.push_back(b.layer_specs[j]);
      }
      auto merged = merge_specs(member_specs);
      if (!merged) return merged.err();
      g.spec = *merged;
      out.groups.push_back(std::move(g));
    }
  }
  return out;
}

expected<std::vector<kv_cache_group>>
add_kv_sharing_layers(std::vector<kv_cache_group> groups,
                      const std::map<std::string, std::string>& shared) {
  for (const auto& entry : shared) {
    const auto& layer = entry.first;
    const auto& target = entry.second; // not a structured binding: the lambda captures it
    auto it = std::find_if(groups.begin(), groups.end(), [&](const kv_cache_group& g) {
      return std::find(g.layer_names.begin(), g.layer_names.end(), target) != g.layer_names.end();
    });
    if (it == groups.end())
      return make_error(
          errc::invalid_argument,
          fmt::format("kv_sharing_target of {}: {} is in no KV cache group", layer, target));
    it->layer_names.push_back(layer);
  }
  return groups;
}

} // namespace kvactor
