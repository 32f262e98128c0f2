// Page-size and memory formulas of the KV cache specs (docs/vllm-semantics.md §2.2–2.3).
#include <algorithm>
#include <set>
#include <string>

#include <fmt/format.h>

#include "messages/kv.hpp"

namespace kvactor {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

kv_cache_spec attention(kv_cache_spec_kind kind, int32_t bs, int32_t heads, int32_t head_size,
                        int32_t head_size_v, dtype dt) {
  kv_cache_spec s;
  s.kind = kind;
  s.block_size = bs;
  s.num_kv_heads = heads;
  s.head_size = head_size;
  s.head_size_v = head_size_v;
  s.kv_dtype = dt;
  return s;
}

// The fields vLLM's AttentionSpec compares when merging full attention specs.
bool same_attention_fields(const kv_cache_spec& a, const kv_cache_spec& b) {
  return a.block_size == b.block_size && a.num_kv_heads == b.num_kv_heads
         && a.head_size == b.head_size && a.head_size_v == b.head_size_v && a.kv_dtype == b.kv_dtype
         && a.page_size_padded == b.page_size_padded && a.sink_len == b.sink_len
         && a.tokens_per_state == b.tokens_per_state;
}

std::string describe(const kv_cache_spec& s) {
  return fmt::format("{}(block_size={}, num_kv_heads={}, head_size={}, dtype={}, window={})",
                     to_string(s.kind), s.block_size, s.num_kv_heads, s.head_size,
                     to_string(s.kv_dtype), s.sliding_window);
}

} // namespace

kv_cache_spec full_attention_spec(int32_t bs, int32_t heads, int32_t head_size, dtype dt,
                                  int32_t sliding_window) {
  auto s = attention(kv_cache_spec_kind::full, bs, heads, head_size, head_size, dt);
  s.sliding_window = sliding_window;
  return s;
}

kv_cache_spec sliding_window_spec(int32_t bs, int32_t heads, int32_t head_size, dtype dt,
                                  int32_t window) {
  auto s = attention(kv_cache_spec_kind::sliding_window, bs, heads, head_size, head_size, dt);
  s.sliding_window = window;
  return s;
}

kv_cache_spec chunked_local_spec(int32_t bs, int32_t heads, int32_t head_size, dtype dt,
                                 int32_t chunk) {
  auto s = attention(kv_cache_spec_kind::chunked_local, bs, heads, head_size, head_size, dt);
  s.attention_chunk_size = chunk;
  return s;
}

kv_cache_spec mla_spec(int32_t bs, int32_t head_size, dtype dt) {
  return attention(kv_cache_spec_kind::mla, bs, 1, head_size, 0, dt);
}

kv_cache_spec cross_attention_spec(int32_t bs, int32_t heads, int32_t head_size, dtype dt) {
  return attention(kv_cache_spec_kind::cross_attention, bs, heads, head_size, head_size, dt);
}

kv_cache_spec encoder_only_spec(int32_t bs, int32_t heads, int32_t head_size, dtype dt) {
  return attention(kv_cache_spec_kind::encoder_only, bs, heads, head_size, head_size, dt);
}

kv_cache_spec mamba_spec(int32_t bs, std::vector<std::vector<int64_t>> shapes,
                         std::vector<dtype> dtypes, mamba_cache_mode mode) {
  kv_cache_spec s;
  s.kind = kv_cache_spec_kind::mamba;
  s.block_size = bs;
  s.state_shapes = std::move(shapes);
  s.state_dtypes = std::move(dtypes);
  s.cache_mode = mode;
  return s;
}

bool is_attention_kind(kv_cache_spec_kind k) {
  return k != kv_cache_spec_kind::mamba && k != kv_cache_spec_kind::uniform_type;
}

bool is_full_family(kv_cache_spec_kind k) {
  return k == kv_cache_spec_kind::full || k == kv_cache_spec_kind::mla
         || k == kv_cache_spec_kind::sink_full;
}

bool is_mla_kind(kv_cache_spec_kind k) {
  return k == kv_cache_spec_kind::mla || k == kv_cache_spec_kind::sliding_window_mla;
}

int64_t state_content_size_bytes(const kv_cache_spec& s) {
  return int64_t{s.head_size + s.head_size_v} * dtype_size(s.kv_dtype);
}

int64_t num_kernel_states(const kv_cache_spec& s, int64_t block_size) {
  return s.tokens_per_state > 0 ? block_size / s.tokens_per_state : 1;
}

int64_t real_page_size_bytes(const kv_cache_spec& s) {
  switch (s.kind) {
  case kv_cache_spec_kind::mamba: {
    int64_t total = 0;
    for (size_t i = 0; i < s.state_shapes.size(); ++i) {
      int64_t n = 1;
      for (auto d : s.state_shapes[i])
        n *= d;
      auto dt = i < s.state_dtypes.size() ? s.state_dtypes[i] : dtype::bfloat16;
      total += n * dtype_size(dt);
    }
    return total;
  }
  case kv_cache_spec_kind::uniform_type: {
    int64_t total = 0;
    for (const auto& l : s.layer_specs)
      total += page_size_bytes(l);
    return total;
  }
  default:
    return int64_t{s.num_kv_heads} * num_kernel_states(s, s.block_size)
           * state_content_size_bytes(s);
  }
}

int64_t page_size_bytes(const kv_cache_spec& s) {
  if (s.page_size_padded > 0) return s.page_size_padded;
  return real_page_size_bytes(s);
}

int64_t max_memory_usage_bytes(const kv_cache_spec& s, const memory_limits& lim) {
  const int64_t page = page_size_bytes(s);
  const int64_t bs = s.block_size;
  const int64_t m = lim.max_model_len;
  switch (s.kind) {
  case kv_cache_spec_kind::full:
  case kv_cache_spec_kind::mla:
  case kv_cache_spec_kind::sink_full: {
    int64_t len = lim.dcp_size > 1 ? ceil_div(m, lim.dcp_size) : m;
    return ceil_div(len, bs) * page;
  }
  case kv_cache_spec_kind::sliding_window:
  case kv_cache_spec_kind::sliding_window_mla: {
    // The window may start mid-block, hence one block more.
    int64_t tokens = std::min<int64_t>(
        s.sliding_window - 1 + s.extra_retained_tokens + lim.max_in_flight_tokens, m);
    return (ceil_div(tokens, bs) + 1) * page;
  }
  case kv_cache_spec_kind::chunked_local: {
    int64_t tokens = std::min<int64_t>(s.attention_chunk_size + lim.max_in_flight_tokens, m);
    return ceil_div(tokens, bs) * page;
  }
  case kv_cache_spec_kind::cross_attention:
    return ceil_div(lim.max_encoder_input_tokens, bs) * page;
  case kv_cache_spec_kind::encoder_only: return 0;
  case kv_cache_spec_kind::mamba:
    switch (s.cache_mode) {
    case mamba_cache_mode::all: return (ceil_div(m, bs) + s.num_speculative_blocks) * page;
    case mamba_cache_mode::align: return (2 + s.num_speculative_blocks) * page;
    case mamba_cache_mode::none: return (1 + s.num_speculative_blocks) * page;
    }
    return page;
  case kv_cache_spec_kind::uniform_type: {
    int64_t pages = 0;
    for (const auto& l : s.layer_specs)
      pages = std::max(pages, ceil_div(max_memory_usage_bytes(l, lim), page_size_bytes(l)));
    return pages * page;
  }
  }
  return 0;
}

int64_t max_num_blocks_per_req(const kv_cache_spec& s, int64_t max_len, int32_t dcp_size) {
  if (s.kind == kv_cache_spec_kind::mamba) return ceil_div(max_len, s.block_size);
  return ceil_div(max_len, int64_t{s.block_size} * std::max(1, dcp_size));
}

kv_cache_spec with_block_size(const kv_cache_spec& s, int32_t block_size) {
  auto out = s;
  out.block_size = block_size;
  for (auto& l : out.layer_specs)
    l.block_size = block_size;
  return out;
}

expected<kv_cache_spec> merge_specs(const std::vector<kv_cache_spec>& specs) {
  if (specs.empty()) return make_error(errc::invalid_argument, "merge_specs: no specs to merge");
  const auto& first = specs.front();
  bool full = first.kind == kv_cache_spec_kind::full || first.kind == kv_cache_spec_kind::sink_full;
  if (!full) {
    for (const auto& s : specs)
      if (!(s == first))
        return make_error(errc::incompatible_specs,
                          fmt::format("kv_cache_spec: {} and {} cannot share a group",
                                      describe(first), describe(s)));
    return first;
  }
  std::set<int32_t> windows;
  std::set<int32_t> chunks;
  bool non_causal = false;
  for (const auto& s : specs) {
    if (s.kind != first.kind || !same_attention_fields(s, first))
      return make_error(errc::incompatible_specs,
                        fmt::format("kv_cache_spec: {} and {} cannot share a group",
                                    describe(first), describe(s)));
    if (s.sliding_window > 0) windows.insert(s.sliding_window);
    if (s.attention_chunk_size > 0) chunks.insert(s.attention_chunk_size);
    non_causal = non_causal || s.non_causal;
  }
  if (windows.size() > 1)
    return make_error(errc::incompatible_specs,
                      fmt::format("sliding_window: full attention layers of one group have "
                                  "different windows ({})",
                                  fmt::join(windows, ", ")));
  if (chunks.size() > 1)
    return make_error(errc::incompatible_specs,
                      fmt::format("attention_chunk_size: full attention layers of one group "
                                  "have different chunk sizes ({})",
                                  fmt::join(chunks, ", ")));
  if (!windows.empty() && !chunks.empty())
    return make_error(errc::incompatible_specs,
                      "kv_cache_spec: a group cannot mix a sliding window and a chunk size");
  auto merged = first;
  merged.sliding_window = windows.empty() ? 0 : *windows.begin();
  merged.attention_chunk_size = chunks.empty() ? 0 : *chunks.begin();
  merged.non_causal = non_causal;
  return merged;
}

bool is_uniform(const std::vector<kv_cache_spec>& specs) {
  return static_cast<bool>(merge_specs(specs));
}

expected<kv_cache_spec> uniform_type_from_specs(const std::vector<std::string>& names,
                                                const std::vector<kv_cache_spec>& specs) {
  if (specs.empty() || names.size() != specs.size())
    return make_error(errc::invalid_argument, "uniform_type: needs one spec per layer name");
  const auto& first = specs.front();
  auto fail = [&](const kv_cache_spec& s) -> error {
    return make_error(
        errc::incompatible_specs,
        fmt::format("uniform_type: {} and {} are not of one type", describe(first), describe(s)));
  };
  for (const auto& s : specs) {
    if (s.block_size != first.block_size) return fail(s);
    switch (first.kind) {
    case kv_cache_spec_kind::full:
    case kv_cache_spec_kind::mla:
    case kv_cache_spec_kind::sink_full:
      if (!is_full_family(s.kind)) return fail(s);
      break;
    case kv_cache_spec_kind::sliding_window:
    case kv_cache_spec_kind::sliding_window_mla:
      if (s.kind != first.kind || s.sliding_window != first.sliding_window) return fail(s);
      break;
    case kv_cache_spec_kind::chunked_local:
      if (s.kind != first.kind || s.attention_chunk_size != first.attention_chunk_size)
        return fail(s);
      break;
    case kv_cache_spec_kind::mamba:
      if (s.kind != first.kind || s.num_speculative_blocks != first.num_speculative_blocks
          || page_size_bytes(s) != page_size_bytes(first))
        return fail(s);
      break;
    default: return fail(s);
    }
  }
  kv_cache_spec w;
  w.kind = kv_cache_spec_kind::uniform_type;
  w.block_size = first.block_size;
  w.layer_names = names;
  w.layer_specs = specs;
  return w;
}

kv_cache_spec_kind group_kind(const kv_cache_spec& s) {
  if (s.kind != kv_cache_spec_kind::uniform_type || s.layer_specs.empty()) return s.kind;
  auto k = s.layer_specs.front().kind;
  bool same = std::all_of(s.layer_specs.begin(), s.layer_specs.end(),
                          [&](const kv_cache_spec& l) { return l.kind == k; });
  return same ? k : kv_cache_spec_kind::full;
}

const kv_cache_spec& layer_spec_of(const kv_cache_group& g, const std::string& layer) {
  if (g.spec.kind != kv_cache_spec_kind::uniform_type || g.spec.layer_specs.empty()) return g.spec;
  auto pos = std::find(g.spec.layer_names.begin(), g.spec.layer_names.end(), layer);
  if (pos == g.spec.layer_names.end()) return g.spec.layer_specs.front();
  return g.spec.layer_specs[static_cast<size_t>(pos - g.spec.layer_names.begin())];
}

} // namespace kvactor
