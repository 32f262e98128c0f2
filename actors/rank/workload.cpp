#include "actors/rank/workload.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace kvactor {

expected<kernels::stack_config> stack_config_for(const model_layout& model, uint64_t seed) {
  kernels::stack_config cfg;
  cfg.hidden_size = model.hidden_size;
  cfg.vocab_size = std::min(std::max(model.vocab_size, 2), max_workload_vocab);
  cfg.seed = seed;
  cfg.tp_rank = model.rank;
  cfg.tp_size = model.tensor_parallel_size;
  cfg.total_q_heads = model.num_heads;
  cfg.total_kv_heads = model.num_kv_heads;
  if (cfg.hidden_size <= 0)
    return make_error(errc::missing_field, fmt::format("hidden_size: the {} config gives no "
                                                       "width for the attention stack",
                                                       model.model_type));
  std::map<std::string, int32_t> index_of;
  for (const auto& l : model.layers) {
    kernels::stack_layer s;
    switch (l.kind) {
    case layer_kind::full: s.kind = kernels::stack_layer_kind::full; break;
    case layer_kind::sliding_window:
      s.kind = kernels::stack_layer_kind::sliding_window;
      s.sliding_window = l.sliding_window;
      break;
    case layer_kind::chunked_local:
      s.kind = kernels::stack_layer_kind::chunked_local;
      s.chunk_size = l.attention_chunk_size;
      break;
    case layer_kind::mla: s.kind = kernels::stack_layer_kind::mla; break;
    default:
      return make_error(errc::unsupported,
                        fmt::format("layer {}: the CPU workload has no {} kernel yet; plan it "
                                    "with `kvactor plan`, run attention-only models",
                                    l.name, to_string(l.kind)));
    }
    s.num_q_heads = l.num_heads;
    s.num_kv_heads = l.num_kv_heads;
    s.head_size = l.head_size + (l.kind == layer_kind::mla ? l.head_size_v : 0);
    s.head_size_v = l.kind == layer_kind::mla ? 0 : l.head_size_v;
    s.softcap = l.logit_softcap;
    s.has_sinks = l.has_sinks;
    s.use_rope = l.use_rope;
    if (!l.kv_sharing_target.empty()) {
      auto it = index_of.find(l.kv_sharing_target);
      if (it == index_of.end())
        return make_error(errc::invalid_argument,
                          fmt::format("kv_sharing_target of {}: {} is not an earlier layer", l.name,
                                      l.kv_sharing_target));
      s.shares_kv_with = it->second;
    }
    index_of[l.name] = static_cast<int32_t>(cfg.layers.size());
    cfg.layers.push_back(s);
  }
  return cfg;
}

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
  default:
    return make_error(errc::unsupported,
                      fmt::format("view of {}: the CPU kernels store float32, bfloat16 or "
                                  "float16, not {}",
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

} // namespace kvactor
