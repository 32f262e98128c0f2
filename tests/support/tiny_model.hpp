// The shipped kvactor-tiny model (deploy/models/kvactor-tiny.json: llama, 4 layers alternating
// sliding(64)/full, hidden 256, 4 q / 2 kv heads of 64, vocab 512, max len 2048) as the actor
// tests use it: a rank_config, the layout and its KV cache groups.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "actors/kv_cache/allocation.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "model/loader.hpp"

namespace kvactor::test {

inline constexpr int64_t tiny_kv_cache_memory = int64_t{8} << 20;

/// Bytes of one block of kvactor-tiny's KV cache on one rank, from the model's shape alone: 16
/// tokens x 2 KV heads (split over the tensor-parallel ranks) x head_dim 64 x K and V x 2 bytes
/// (bfloat16) per layer, and 2 layers per block id (the sliding and the full group each hold 2
/// of the 4 layers; vLLM's hybrid layout lets the i-th layer of every group share a tensor).
inline constexpr int64_t tiny_block_bytes(int32_t tensor_parallel_size = 1) {
  return int64_t{16} * (2 / tensor_parallel_size) * 64 * 2 * 2 * 2;
}

/// The blocks tiny_rank_config()'s 8 MiB hold: 512 on one rank, 1024 per rank with TP 2.
inline constexpr int64_t tiny_expected_blocks(int32_t tensor_parallel_size = 1) {
  return tiny_kv_cache_memory / tiny_block_bytes(tensor_parallel_size);
}

/// A CPU rank_config for kvactor-tiny with an 8 MiB KV cache.
inline rank_config tiny_rank_config(int32_t num_ubatches = 1, uint64_t seed = 1) {
  rank_config c;
  c.model = "kvactor-tiny";
  c.device = device_kind::cpu;
  c.max_model_len = 2048;
  c.kv_cache_memory = tiny_kv_cache_memory;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.num_ubatches = num_ubatches;
  c.seed = seed;
  return c;
}

/// kvactor-tiny's layout for rank 0 (a default layout and a failure if it does not load).
inline model_layout tiny_layout() {
  auto models = load_model("kvactor-tiny", {});
  if (!models) {
    ADD_FAILURE() << "kvactor-tiny: " << models.err().message;
    return {};
  }
  return models->front();
}

/// The kv_plan_request a rank sends for tiny_rank_config().
inline kv_plan_request tiny_plan_request() {
  kv_plan_request r;
  r.limits.max_model_len = 2048;
  r.limits.max_in_flight_tokens = 256;
  r.block_size = 16;
  r.available_bytes = tiny_kv_cache_memory;
  return r;
}

/// The block count a kvactor-tiny rank plans with tiny_rank_config() (0 and a failure on error).
inline int64_t tiny_num_blocks() {
  kv_cache_allocator allocator;
  auto plan = allocator.plan(tiny_layout(), tiny_plan_request());
  if (!plan) {
    ADD_FAILURE() << "kvactor-tiny plan: " << plan.err().message;
    return 0;
  }
  return plan->config.num_blocks;
}

/// The KV cache groups a rank binds for kvactor-tiny (planned with tiny_plan_request()).
inline std::vector<kv_cache_group> tiny_groups() {
  kv_cache_allocator allocator;
  auto plan = allocator.plan(tiny_layout(), tiny_plan_request());
  if (!plan) {
    ADD_FAILURE() << "kvactor-tiny plan: " << plan.err().message;
    return {};
  }
  return allocator.groups();
}

// 6 requests whose prompts (258 tokens in all) exceed one step's budget of 256 tokens, so that
// prefill is chunked; some prompts cross the sliding window of 64 and several 16-token blocks.
inline std::vector<request_spec> tiny_six_requests() {
  const std::vector<int32_t> prompt_lens{12, 33, 70, 5, 48, 90};
  std::vector<request_spec> out;
  for (size_t i = 0; i < prompt_lens.size(); ++i) {
    request_spec r;
    r.request_id = i;
    for (int32_t k = 0; k < prompt_lens[i]; ++k)
      r.prompt.push_back(static_cast<int32_t>((i * 131 + static_cast<size_t>(k) * 17) % 512));
    r.max_output_tokens = 6 + static_cast<int32_t>(i % 3);
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace kvactor::test
