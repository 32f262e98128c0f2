// One sample value per message type, with every field away from its default (checked by
// Samples.SetEveryFieldToANonDefaultValue), and the list of all message types for typed tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "messages/backend.hpp"
#include "messages/codec.hpp"
#include "messages/cudagraph.hpp"
#include "messages/errc.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"

namespace kvactor::test {

/// Every type of the kvactor type-ID block (messages/type_ids.hpp), in block order.
using message_types =
    ::testing::Types<attention_layer, model_layout, kv_cache_spec, memory_limits, kv_cache_group,
                     kv_cache_tensor, kv_cache_config, kv_cache_view, kv_cache_capacity,
                     block_size_constraint, backend_capabilities, attention_group,
                     graph_support_info, batch_descriptor, cudagraph_plan, error>;

/// Names typed tests after the message type: CodecRoundTrip/kv_cache_spec.PreservesEveryField.
struct message_type_names {
  template <class T>
  static std::string GetName(int) {
    std::string name{detail::type_name_of(T{})};
    return name.substr(name.rfind(':') + 1);
  }
};

template <class T>
T sample();

template <>
inline attention_layer sample<attention_layer>() {
  attention_layer x;
  x.name = "model.layers.3.self_attn.attn";
  x.index = 3;
  x.kind = layer_kind::sliding_window;
  x.num_heads = 8;
  x.num_kv_heads = 2;
  x.head_size = 128;
  x.head_size_v = 96;
  x.kv_dtype = dtype::fp8_e4m3;
  x.sliding_window = 4096;
  x.attention_chunk_size = 8192;
  x.has_sinks = true;
  x.use_rope = false;
  x.kv_sharing_target = "model.layers.1.self_attn.attn";
  x.state_type = "gated_delta_net";
  x.state_shapes = {{4, 128}, {16, 64, 2}};
  x.state_dtypes = {dtype::float32, dtype::bfloat16};
  return x;
}

template <>
inline model_layout sample<model_layout>() {
  attention_layer mamba;
  mamba.name = "model.layers.4.mixer";
  mamba.index = 4;
  mamba.kind = layer_kind::mamba;
  mamba.state_type = "mamba1";
  mamba.state_shapes = {{3, 2048}, {2048, 16}};
  mamba.state_dtypes = {dtype::bfloat16, dtype::float32};
  model_layout x;
  x.model_type = "jamba";
  x.rank = 1;
  x.tensor_parallel_size = 2;
  x.num_heads = 64;
  x.num_kv_heads = 8;
  x.max_position_embeddings = 262144;
  x.max_encoder_input_tokens = 1500;
  x.model_dtype = dtype::float16;
  x.num_attn_modules = 2;
  x.layers = {sample<attention_layer>(), mamba};
  return x;
}

/// A uniform_type wrapper with every field set, wrapping a full and a Mamba spec.
template <>
inline kv_cache_spec sample<kv_cache_spec>() {
  kv_cache_spec x;
  x.kind = kv_cache_spec_kind::uniform_type;
  x.block_size = 32;
  x.num_kv_heads = 4;
  x.head_size = 64;
  x.head_size_v = 48;
  x.kv_dtype = dtype::float16;
  x.page_size_padded = 65536;
  x.sliding_window = 1024;
  x.attention_chunk_size = 2048;
  x.extra_retained_tokens = 3;
  x.sink_len = 4;
  x.non_causal = true;
  x.tokens_per_state = 4;
  x.state_shapes = {{2, 3}, {}};
  x.state_dtypes = {dtype::float32, dtype::int8};
  x.cache_mode = mamba_cache_mode::align;
  x.num_speculative_blocks = 2;
  x.layer_names = {"model.layers.0.self_attn.attn", "model.layers.1.mixer"};
  x.layer_specs = {full_attention_spec(32, 8, 128, dtype::bfloat16, 4096),
                   mamba_spec(32, {{4, 128, 16}, {8, 64}}, {dtype::float32, dtype::bfloat16},
                              mamba_cache_mode::all)};
  return x;
}

template <>
inline memory_limits sample<memory_limits>() {
  return {32768, 8192, 1500, 2};
}

template <>
inline kv_cache_group sample<kv_cache_group>() {
  return {{"model.layers.0.self_attn.attn", "model.layers.2.self_attn.attn"},
          sliding_window_spec(16, 8, 128, dtype::bfloat16, 4096)};
}

template <>
inline kv_cache_tensor sample<kv_cache_tensor>() {
  return {int64_t{1} << 40,
          {"model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"},
          4096,
          8192,
          512};
}

template <>
inline kv_cache_config sample<kv_cache_config>() {
  kv_cache_config x;
  x.num_blocks = 1000;
  x.tensors = {sample<kv_cache_tensor>(), kv_cache_tensor{1 << 20, {"l2"}, 64, 128, 0}};
  x.groups = {sample<kv_cache_group>(), kv_cache_group{{"l2"}, mla_spec(64, 576, dtype::fp8_e4m3)}};
  x.layout = kv_cache_layout::bhlnc;
  return x;
}

template <>
inline kv_cache_view sample<kv_cache_view>() {
  return {
      "model.layers.0.self_attn.attn", dtype::int8, {100, 8, 16, 256}, {32768, 4096, 256, 1}, 1024};
}

template <>
inline kv_cache_capacity sample<kv_cache_capacity>() {
  return {123456, 3.75};
}

template <>
inline block_size_constraint sample<block_size_constraint>() {
  return multiple_of(16);
}

template <>
inline backend_capabilities sample<backend_capabilities>() {
  backend_capabilities x;
  x.name = "flash_attn";
  x.kernel_block_sizes = {multiple_of(16), exactly(32)};
  x.spec_kinds = {kv_cache_spec_kind::full, kv_cache_spec_kind::sliding_window};
  x.kv_dtypes = {dtype::bfloat16, dtype::fp8_e4m3};
  x.head_sizes = {64, 128, 256};
  x.layout = kv_cache_layout::lbnhc;
  x.cudagraph_support = graph_support::uniform_batch;
  x.supports_sinks = true;
  x.query_lens_mismatch_ok = true;
  x.requires_gpu = true;
  x.workspace_bytes = int64_t{1} << 26;
  x.reorder_batch_threshold = 4;
  x.priority = -5;
  return x;
}

template <>
inline attention_group sample<attention_group>() {
  return {"flashinfer",
          {"model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"},
          mla_spec(64, 576, dtype::bfloat16),
          2,
          16};
}

template <>
inline graph_support_info sample<graph_support_info>() {
  return {graph_support::uniform_single_token_decode, "triton_attn"};
}

template <>
inline batch_descriptor sample<batch_descriptor>() {
  return {cudagraph_mode::full, 256, 64, 4, 4, 2, true, 2};
}

template <>
inline cudagraph_plan sample<cudagraph_plan>() {
  cudagraph_plan x;
  x.requested = cudagraph_mode::full_decode_only;
  x.mode = cudagraph_mode::full;
  x.support = sample<graph_support_info>();
  x.uniform_decode_query_len = 4;
  x.capture_sizes = {1, 2, 4, 8, 16};
  x.full_graphs = {sample<batch_descriptor>(),
                   batch_descriptor{cudagraph_mode::full, 8, 2, 4, 4, 0, false, 1}};
  x.piecewise_graphs = {batch_descriptor{cudagraph_mode::piecewise, 512, 0, 0, 0, 0, false, 1}};
  x.notes = {"full_and_piecewise narrowed to full_decode_only by triton_attn"};
  return x;
}

template <>
inline error sample<error>() {
  return {errc::invalid_split, "num_kv_heads 8 is not divisible by tensor_parallel_size 3"};
}

} // namespace kvactor::test
