// One sample value per message type, with every field away from its default (checked by
// Samples.SetEveryFieldToANonDefaultValue), and the list of all message types for typed tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "messages/backend.hpp"
#include "messages/codec.hpp"
#include "messages/collective.hpp"
#include "messages/cudagraph.hpp"
#include "messages/errc.hpp"
#include "messages/inject.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"
#include "messages/node.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"

namespace kvactor::test {

/// Every type of the kvactor type-ID block (messages/type_ids.hpp), in block order.
using message_types =
    ::testing::Types<attention_layer, model_layout, kv_cache_spec, memory_limits, kv_cache_group,
                     kv_cache_tensor, kv_cache_config, kv_cache_view, kv_cache_capacity,
                     block_size_constraint, backend_capabilities, attention_group,
                     graph_support_info, batch_descriptor, cudagraph_plan, error,
                     // step.hpp
                     new_request, block_table_update, scheduled_request, step_plan, sampled_token,
                     step_timing, step_done, step_rejected,
                     // runtime.hpp
                     rank_config, phase_timing, backend_assignment, kv_plan_request,
                     cudagraph_request, memory_entry, cudagraph_captured, kv_local_plan,
                     kv_allocation, rank_plan, rank_ready, ubatch_work, metadata_ready,
                     // request.hpp
                     request_spec, request_result, run_summary, request_updates, request_abort,
                     // inject.hpp
                     inject_request, inject_reply,
                     // collective.hpp
                     communicator_id, collective_entry,
                     // node.hpp
                     node_info, rank_spawn, node_step, node_step_done, node_channel_event,
                     // request.hpp: kvactor inject --wait
                     request_await>;

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
  x.logit_softcap = 50.0f;
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
  x.hidden_size = 4096;
  x.vocab_size = 65536;
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
inline cudagraph_captured sample<cudagraph_captured>() {
  return {sample<batch_descriptor>(), 3 << 20, 4'500'000, "cudaErrorMemoryAllocation"};
}

template <>
inline node_info sample<node_info>() {
  return {cluster_protocol,
          4,
          "0.1.0+gabc",
          "10.0.0.2:7400",
          device_kind::cuda,
          8,
          3,
          4242,
          int64_t{141} << 30,
          int64_t{100} << 30,
          40211};
}

template <>
inline rank_spawn sample<rank_spawn>() {
  return {5, 8, 1, 30'000};
}

template <>
inline error sample<error>() {
  return {errc::invalid_split, "num_kv_heads 8 is not divisible by tensor_parallel_size 3"};
}

// ---- step.hpp ------------------------------------------------------------------------------

/// Request ids above INT64_MAX check that uint64_t fields keep their full range.
inline constexpr uint64_t large_request_id = 0xfedcba9876543210ULL;

/// Sampling that sets every field (a greedy request leaves most at their defaults).
template <>
inline sampling_params sample<sampling_params>() {
  return {0.7f, 40, 0.95f, 0xfeedfacecafebeefULL, {128001, 128009}, 5};
}

template <>
inline new_request sample<new_request>() {
  return {large_request_id, 1000, 256, sample<sampling_params>(), 512};
}

template <>
inline block_table_update sample<block_table_update>() {
  return {42, 1, 8, {0, 17, 18, 4095}};
}

template <>
inline scheduled_request sample<scheduled_request>() {
  return {large_request_id, 512, {101, 102, -1, 65535}, true};
}

template <>
inline step_plan sample<step_plan>() {
  step_plan x;
  x.seq = 123456789012ULL;
  x.epoch = 3;
  x.new_requests = {sample<new_request>(), new_request{7, 1, 1}};
  x.finished_requests = {5, large_request_id};
  x.block_updates = {sample<block_table_update>(), block_table_update{7, 0, 0, {}}};
  x.scheduled = {sample<scheduled_request>(), scheduled_request{7, 0, {1}, false}};
  x.num_ubatches = 2;
  return x;
}

template <>
inline sampled_token sample<sampled_token>() {
  return {large_request_id, 128255, {-0.25f, {{128255, -0.25f}, {13, -1.75f}}}};
}

template <>
inline step_timing sample<step_timing>() {
  return {int64_t{5} << 32, 1'250'000, 3'500'000};
}

template <>
inline step_done sample<step_done>() {
  step_done x;
  x.seq = 123456789012ULL;
  x.epoch = 3;
  x.rank = 1;
  x.sampled = {sample<sampled_token>(), sampled_token{7, 0}};
  x.timing = sample<step_timing>();
  x.executed = sample<batch_descriptor>();
  return x;
}

// ---- runtime.hpp ---------------------------------------------------------------------------

template <>
inline rank_config sample<rank_config>() {
  rank_config x;
  x.rank = 3;
  x.tensor_parallel_size = 4;
  x.model = "llama-3.1-8b";
  x.dtype = "bfloat16";
  x.kv_cache_dtype = "fp8_e4m3";
  x.device = device_kind::cuda;
  x.attention_backend = "flash_attn";
  x.block_size = 32;
  x.max_model_len = 131072;
  x.max_num_seqs = 128;
  x.max_num_batched_tokens = 8192;
  x.kv_cache_memory = int64_t{40} << 30;
  x.num_gpu_blocks_override = 4096;
  x.cudagraph = cudagraph_mode::full_decode_only;
  x.cudagraph_capture_sizes = {1, 2, 4, 8};
  x.num_ubatches = 2;
  x.seed = 0xffffffffffffffffULL;
  x.executor = "protocol";
  x.enable_prefix_caching = true;
  x.cudagraph_lazy = true;
  x.cudagraph_memory = int64_t{5} << 20;
  return x;
}

template <>
inline phase_timing sample<phase_timing>() {
  return {"kv_cache.allocate", 12'345'678, int64_t{3} << 30, int64_t{5} << 30,
          (int64_t{5} << 30) + (int64_t{500} << 20)};
}

template <>
inline backend_assignment sample<backend_assignment>() {
  backend_assignment x;
  attention_group other{"triton_attn", {"model.layers.2.self_attn.attn"}, kv_cache_spec{}, 0, 0};
  x.attention_groups = {{sample<attention_group>(), other}, {}};
  x.kernel_block_sizes = {16, 0};
  x.support = sample<graph_support_info>();
  x.query_lens_mismatch_backend = "flashinfer";
  return x;
}

template <>
inline kv_plan_request sample<kv_plan_request>() {
  kv_plan_request x;
  x.limits = sample<memory_limits>();
  x.block_size = 32;
  x.available_bytes = int64_t{20} << 30;
  x.num_gpu_blocks_override = 2048;
  x.layout = kv_cache_layout::blnhc;
  return x;
}

template <>
inline cudagraph_request sample<cudagraph_request>() {
  cudagraph_request x;
  x.requested = cudagraph_mode::piecewise;
  x.support = sample<graph_support_info>();
  x.uniform_decode_query_len = 4;
  x.max_num_seqs = 64;
  x.max_num_batched_tokens = 4096;
  x.capture_sizes = {1, 2, 4, 8, 16, 32};
  x.has_mamba = true;
  x.num_blocks = 9000;
  x.gpu = true;
  x.lazy = true;
  x.memory_cap = int64_t{3} << 20;
  x.not_capturable = "tensor parallelism";
  return x;
}

template <>
inline memory_entry sample<memory_entry>() {
  return {"builder[1]", int64_t{1} << 33};
}

template <>
inline kv_local_plan sample<kv_local_plan>() {
  return {sample<kv_cache_config>(),
          int64_t{24} << 30,
          {"num_gpu_blocks_override 2048 ignores 1 GiB of the budget"}};
}

template <>
inline kv_allocation sample<kv_allocation>() {
  return {0x8000000000001000ULL,
          1000,
          int64_t{1} << 34,
          {sample<kv_cache_view>(), kv_cache_view{"l2", dtype::bfloat16, {1}, {1}, 0}}};
}

template <>
inline rank_plan sample<rank_plan>() {
  return {2,
          sample<kv_local_plan>(),
          sample<backend_assignment>(),
          {sample<phase_timing>(), phase_timing{"load_model", 1, 0}}};
}

template <>
inline rank_ready sample<rank_ready>() {
  return {2, 1000, int64_t{1} << 34, sample<cudagraph_plan>(), {sample<phase_timing>()}, 128256};
}

template <>
inline ubatch_work sample<ubatch_work>() {
  return {123456789012ULL, 1, 256, 512, 3, 9};
}

template <>
inline metadata_ready sample<metadata_ready>() {
  return {123456789012ULL, 1, 6, 256, 87'500, 0x9e3779b97f4a7c15ULL};
}

template <>
inline step_rejected sample<step_rejected>() {
  return {77, 3, error{errc::invalid_argument, "block id 9999 is out of range"}, {5, 9}};
}

template <>
inline node_step sample<node_step>() {
  return {encode(sample<step_plan>()), {0, 2}, 270'000};
}

template <>
inline node_step_done sample<node_step_done>() {
  return {sample<step_plan>().seq, {sample<step_done>()}, {sample<step_rejected>()}, {6}};
}

template <>
inline node_channel_event sample<node_channel_event>() {
  return {3, channel_event_kind::refusal, 17, sample<node_step_done>(),
          make_error(errc::invalid_argument, "node_step: slot 4 hosts no rank")};
}

template <>
inline inject_request sample<inject_request>() {
  return {"rank[1]", {'\x93', '\xa1', 'x', '\x02', '\x90'}};
}

template <>
inline inject_reply sample<inject_reply>() {
  return {"kvactor::step_done", {'\x93', '\x01'}, "rank[1] answered step 4"};
}

// ---- request.hpp ---------------------------------------------------------------------------

template <>
inline request_spec sample<request_spec>() {
  return {large_request_id, {128000, 791, 6864, 374}, 64, 2'500'000'000, sample<sampling_params>()};
}

/// A finished request that also carries a failure text, so that every field is set.
template <>
inline request_result sample<request_result>() {
  return {large_request_id,
          true,
          {13, 578, 4320},
          2,
          "preempted twice, then finished",
          finish_reason::stop,
          {{-0.5f, {{13, -0.5f}}}, {-1.0f, {{9, -0.75f}}}, {-0.125f, {{4320, -0.125f}}}}};
}

/// A token update with logprobs, and the last update of a request that failed.
template <>
inline request_updates sample<request_updates>() {
  request_updates x;
  x.updates = {{large_request_id, {13, 578}, {{-0.5f, {{13, -0.5f}}}, {-2.0f, {{9, -0.25f}}}}},
               {7, {}, {}, true, false, finish_reason::none, "client disconnected"}};
  return x;
}

template <>
inline request_abort sample<request_abort>() {
  return {large_request_id, "client disconnected"};
}

template <>
inline request_await sample<request_await>() {
  return request_await{4242};
}

template <>
inline run_summary sample<run_summary>() {
  run_summary x;
  x.finished = 90;
  x.failed = 2;
  x.preempted = 7;
  x.prompt_tokens = 123456;
  x.generated_tokens = 6400;
  x.steps = 812;
  x.wall_s = 12.5;
  x.step_ms_p50 = 3.25;
  x.step_ms_p99 = 17.125;
  x.ttft_ms_p50 = 41.5;
  x.ttft_ms_p99 = 250.25;
  x.tpot_ms_p50 = 3.5;
  x.tpot_ms_p99 = 9.75;
  x.e2e_ms_p50 = 180.5;
  x.e2e_ms_p99 = 900.125;
  x.kv_blocks_total = 8192;
  x.kv_blocks_peak_used = 8000;
  x.kv_blocks_held_at_end = 3;
  x.graph_replays = 700;
  x.eager_steps = 112;
  x.prefix_hit_tokens = 4096;
  x.output_digest = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  x.results = {sample<request_result>(), request_result{7, false, {}, 0, "kv cache exhausted"}};
  x.error = {errc::collective_failed,
             "step 9: a collective failed: rank 1 is at all_reduce(sum) #37"};
  return x;
}

// ---- collective.hpp ------------------------------------------------------------------------

/// An id of NCCL's size (128 bytes) with every byte value that matters for a byte blob: 0, 0x80,
/// 0xff.
template <>
inline communicator_id sample<communicator_id>() {
  communicator_id x;
  for (int i = 0; i < 128; ++i)
    x.bytes.push_back(static_cast<char>(i * 2 + 1));
  x.bytes[5] = '\0';
  x.bytes[6] = static_cast<char>(0x80);
  x.bytes[7] = static_cast<char>(0xff);
  x.world = 8;
  x.epoch = 0xfedcba9876543210ULL;
  return x;
}

template <>
inline collective_entry sample<collective_entry>() {
  return {0x8000000000000025ULL,       "all_reduce(sum)", "float32", 8192, 32768,
          collective_status::timed_out};
}

} // namespace kvactor::test
