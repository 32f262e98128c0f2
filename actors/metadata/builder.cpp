#include "actors/metadata/builder.hpp"

#include <set>

#include <fmt/format.h>

namespace kvactor {

namespace {

error invalid(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

template <class T>
std::vector<T> prefix(const std::vector<T>& xs, size_t n) {
  return std::vector<T>(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n));
}

status check_inputs(const attention_inputs& in, size_t num_groups) {
  if (in.groups.size() != num_groups)
    return invalid(fmt::format("groups: {} block tables / slot mappings for {} KV cache groups",
                               in.groups.size(), num_groups));
  if (in.num_reqs < 0) return invalid(fmt::format("num_reqs: {} is negative", in.num_reqs));
  if (in.num_tokens < 0) return invalid(fmt::format("num_tokens: {} is negative", in.num_tokens));
  if (in.ubatch_idx < 0) return invalid(fmt::format("ubatch_idx: {} is negative", in.ubatch_idx));
  auto num_reqs = static_cast<size_t>(in.num_reqs);
  if (in.query_start_loc.size() < num_reqs + 1)
    return invalid(fmt::format("query_start_loc: {} entries, fewer than num_reqs + 1 = {}",
                               in.query_start_loc.size(), num_reqs + 1));
  if (in.seq_lens.size() < num_reqs)
    return invalid(fmt::format("seq_lens: {} entries, fewer than num_reqs = {}", in.seq_lens.size(),
                               num_reqs));
  if (!in.is_prefilling.empty() && in.is_prefilling.size() < num_reqs)
    return invalid(fmt::format("is_prefilling: {} entries, fewer than num_reqs = {}",
                               in.is_prefilling.size(), num_reqs));
  for (size_t i = 0; i < num_groups; ++i) {
    const auto& g = in.groups[i];
    if (g.width < 0) return invalid(fmt::format("groups[{}].width: {} is negative", i, g.width));
    if (g.block_table.size() < num_reqs * static_cast<size_t>(g.width))
      return invalid(fmt::format("groups[{}].block_table: {} entries, fewer than num_reqs x "
                                 "width = {} x {}",
                                 i, g.block_table.size(), num_reqs, g.width));
  }
  return ok();
}

status check_builders(const std::vector<std::vector<attention_group>>& attn_groups,
                      const builder_table& builders, int32_t ubatch_idx) {
  if (builders.size() != attn_groups.size())
    return invalid(fmt::format("builders: {} KV cache groups, attn_groups has {}", builders.size(),
                               attn_groups.size()));
  std::set<std::string> layers;
  for (size_t i = 0; i < attn_groups.size(); ++i) {
    if (builders[i].size() != attn_groups[i].size())
      return invalid(fmt::format("builders[{}]: {} attention groups, attn_groups[{}] has {}", i,
                                 builders[i].size(), i, attn_groups[i].size()));
    for (size_t j = 0; j < attn_groups[i].size(); ++j) {
      const auto& per_ubatch = builders[i][j];
      if (static_cast<size_t>(ubatch_idx) >= per_ubatch.size())
        return invalid(fmt::format("ubatch_idx: {} out of range, builders[{}][{}] has {} "
                                   "ubatches",
                                   ubatch_idx, i, j, per_ubatch.size()));
      if (!per_ubatch[static_cast<size_t>(ubatch_idx)])
        return invalid(fmt::format("builders[{}][{}][{}]: no builder", i, j, ubatch_idx));
      for (const auto& name : attn_groups[i][j].layer_names)
        if (!layers.insert(name).second)
          return invalid(fmt::format("attn_groups[{}][{}]: layer '{}' is in two attention "
                                     "groups",
                                     i, j, name));
    }
  }
  return ok();
}

common_attention_metadata make_common(const attention_inputs& in, size_t group) {
  auto num_reqs = static_cast<size_t>(in.num_reqs);
  const auto& tables = in.groups[group];
  common_attention_metadata m;
  m.query_start_loc = prefix(in.query_start_loc, num_reqs + 1);
  m.seq_lens = prefix(in.seq_lens, num_reqs);
  m.num_reqs = in.num_reqs;
  m.num_actual_tokens = in.num_tokens;
  m.max_query_len = in.max_query_len;
  m.max_seq_len = in.max_seq_len;
  m.block_table = tables.block_table.first(num_reqs * static_cast<size_t>(tables.width));
  m.block_table_width = tables.width;
  m.slot_mapping = tables.slot_mapping;
  m.positions = in.positions;
  auto causal = in.causal.find(static_cast<int32_t>(group));
  m.causal = causal == in.causal.end() || causal->second;
  if (!in.is_prefilling.empty()) m.is_prefilling = prefix(in.is_prefilling, num_reqs);
  if (in.fast_prefill) {
    m.logits_indices_padded = in.fast_prefill->logits_indices_padded;
    m.num_logits_indices = in.fast_prefill->num_logits_indices;
    m.max_logits_per_req = in.fast_prefill->max_logits_per_req;
  }
  return m;
}

} // namespace

metadata_builder::~metadata_builder() = default;

std::shared_ptr<const backend_metadata>
reference_builder::build(int32_t, const common_attention_metadata& m) {
  auto out = std::make_shared<backend_metadata>();
  out->backend = backend_;
  out->common = m;
  return out;
}

expected<layer_metadata>
build_attention_metadata(const std::vector<std::vector<attention_group>>& attn_groups,
                         builder_table& builders, const attention_inputs& in) {
  // Everything is checked before the first builder runs: builders may write persistent buffers.
  if (auto s = check_builders(attn_groups, builders, in.ubatch_idx); !s) return s.err();
  if (auto s = check_inputs(in, attn_groups.size()); !s) return s.err();
  std::vector<common_attention_metadata> commons(attn_groups.size());
  for (size_t i = 0; i < attn_groups.size(); ++i) {
    if (attn_groups[i].empty()) continue;
    commons[i] = make_common(in, i);
    if (auto s = validate(commons[i]); !s)
      return invalid(fmt::format("KV cache group {}: {}", i, s.err().message));
  }
  layer_metadata out;
  auto u = static_cast<size_t>(in.ubatch_idx);
  for (size_t i = 0; i < attn_groups.size(); ++i)
    for (size_t j = 0; j < attn_groups[i].size(); ++j) {
      auto& builder = *builders[i][j][u];
      auto md = in.for_cudagraph_capture ? builder.build_for_cudagraph_capture(commons[i])
                                         : builder.build(0, commons[i]);
      if (!md)
        return invalid(fmt::format("builders[{}][{}][{}]: backend '{}' built no metadata", i, j, u,
                                   attn_groups[i][j].backend));
      for (const auto& name : attn_groups[i][j].layer_names)
        out.emplace(name, md);
    }
  return out;
}

} // namespace kvactor
