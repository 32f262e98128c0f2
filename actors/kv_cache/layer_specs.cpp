#include "actors/kv_cache/layer_specs.hpp"

#include <algorithm>

namespace kvactor {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

} // namespace

kv_cache_spec spec_for_layer(const attention_layer& l, const spec_options& opt) {
  const auto bs = opt.block_size;
  switch (l.kind) {
  case layer_kind::full: return full_attention_spec(bs, l.num_kv_heads, l.head_size, l.kv_dtype);
  case layer_kind::sliding_window:
    return sliding_window_spec(bs, l.num_kv_heads, l.head_size, l.kv_dtype, l.sliding_window);
  case layer_kind::chunked_local:
    return chunked_local_spec(bs, l.num_kv_heads, l.head_size, l.kv_dtype, l.attention_chunk_size);
  case layer_kind::mla: {
    auto s = mla_spec(bs, l.head_size + l.head_size_v, l.kv_dtype);
    if (l.sliding_window > 0) {
      s.kind = kv_cache_spec_kind::sliding_window_mla;
      s.sliding_window = l.sliding_window;
    }
    return s;
  }
  case layer_kind::cross_attention:
    return cross_attention_spec(bs, l.num_kv_heads, l.head_size, l.kv_dtype);
  case layer_kind::encoder_only:
    return encoder_only_spec(bs, l.num_kv_heads, l.head_size, l.kv_dtype);
  case layer_kind::mamba: {
    // One state per request, whatever its length: the block spans the whole request.
    auto block = static_cast<int32_t>(std::max<int64_t>(opt.max_model_len, 1));
    return mamba_spec(block, l.state_shapes, l.state_dtypes);
  }
  }
  return {};
}

layer_spec_list kv_cache_specs(const std::vector<attention_layer>& layers,
                               const spec_options& opt) {
  layer_spec_list out;
  for (const auto& l : layers) {
    if (!l.kv_sharing_target.empty() || l.kind == layer_kind::encoder_only) continue;
    out.push_back({l.name, spec_for_layer(l, opt)});
  }
  int64_t state_page = 0;
  int64_t attn_token_bytes = 0;
  for (const auto& [name, s] : out) {
    if (s.kind == kv_cache_spec_kind::mamba)
      state_page = std::max(state_page, page_size_bytes(s));
    else if (is_attention_kind(s.kind))
      attn_token_bytes = std::max(attn_token_bytes, page_size_bytes(s) / s.block_size);
  }
  if (state_page == 0 || attn_token_bytes == 0) return out;
  const int64_t align = opt.block_size;
  const auto attn_block =
      static_cast<int32_t>(align * ceil_div(state_page, align * attn_token_bytes));
  int64_t attn_page = 0;
  for (auto& [name, s] : out) {
    if (!is_attention_kind(s.kind)) continue;
    if (attn_block > s.block_size) s.block_size = attn_block;
    attn_page = std::max(attn_page, page_size_bytes(s));
  }
  for (auto& [name, s] : out)
    if (s.kind == kv_cache_spec_kind::mamba && page_size_bytes(s) < attn_page)
      s.page_size_padded = attn_page;
  return out;
}

layer_spec_list encoder_only_specs(const std::vector<attention_layer>& layers,
                                   const spec_options& opt) {
  layer_spec_list out;
  for (const auto& l : layers)
    if (l.kind == layer_kind::encoder_only && l.kv_sharing_target.empty())
      out.push_back({l.name, spec_for_layer(l, opt)});
  return out;
}

std::map<std::string, std::string>
shared_kv_cache_layers(const std::vector<attention_layer>& layers) {
  std::map<std::string, std::string> out;
  for (const auto& l : layers)
    if (!l.kv_sharing_target.empty()) out.emplace(l.name, l.kv_sharing_target);
  return out;
}

std::set<std::string> fast_prefill_eligible_layers(const std::vector<attention_layer>& layers,
                                                   bool enabled,
                                                   const std::set<std::string>& draft_layers) {
  std::set<std::string> out;
  if (!enabled) return out;
  bool any_sharing = std::any_of(layers.begin(), layers.end(), [](const attention_layer& l) {
    return !l.kv_sharing_target.empty();
  });
  if (!any_sharing) return out;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    if (it->kind == layer_kind::mamba) continue; // only attention layers take part
    if (draft_layers.count(it->name) > 0) continue;
    if (it->kv_sharing_target.empty()) break;
    out.insert(it->name);
  }
  return out;
}

} // namespace kvactor
