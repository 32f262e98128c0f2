// `kvactor run`'s configuration core: from checked flags, the device and (for a GPU) what it has
// free, the model's limits, every rank's KV cache budget (the rule `kvactor plan` applies, in
// actors/driver/kv_budget.hpp), the rank configurations and the workload. No actors.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "deploy/run_command.hpp"
#include "deploy/run_options.hpp"
#include "kvactor/kernels/device_runtime.h"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "model/hf_decoder.hpp"

namespace kvactor {

/// A CPU run without --kv-cache-memory caches this many bytes per rank.
inline constexpr int64_t default_cpu_kv_cache = int64_t{256} << 20;
/// CUDA context, cuBLAS workspace and allocator slack a GPU rank needs besides its ledger.
inline constexpr int64_t gpu_reserve_bytes = int64_t{512} << 20;

/// The decoder rank 0 runs for `model` (a directory or a shipped name): its config.json read as a
/// decoder at this tensor-parallel size. Families kvactor plans but cannot run (mixture of
/// experts, state-space layers) fail, saying what is missing.
expected<hf_decoder_config> rank0_decoder_of(const std::string& model,
                                             int32_t tensor_parallel_size);
/// Its GPU bytes on each rank: its exact weight bytes and its workspaces for max_tokens.
expected<int64_t> decoder_gpu_bytes_of(const std::string& model, int32_t tensor_parallel_size,
                                       int32_t max_tokens);

struct run_configuration {
  device_kind device = device_kind::cpu;
  std::vector<rank_config> configs; // [ranks]
  std::vector<request_spec> workload;
};

/// Configures a run of `device` (resolved: never auto); `gpu` is the first GPU as measured (or as
/// a node reports it) when device is cuda. Errors name the flag: a model that does not load, a
/// --max-model-len above the model's, a budget that leaves no KV cache. `ranks_per_gpu` ranks
/// share that GPU (--gpu-ids 0,0,...): they split what it has.
expected<run_configuration> configure_run(const run_flags& flags, const run_options& options,
                                          device_kind device,
                                          const std::optional<kernels::gpu_info>& gpu,
                                          int32_t ranks_per_gpu = 1);

/// Each rank's KV cache budget: --kv-cache-memory when given; on a GPU, vLLM's rule over the
/// measured GPU less the decoder (weights and workspaces) the rank builds later, the reserve and
/// the CUDA graph pool; on a CPU, default_cpu_kv_cache. `ranks_per_gpu` ranks sharing the GPU
/// each take an equal part of what is left once all their decoders are counted.
expected<std::vector<int64_t>> kv_cache_budgets(const run_flags& flags, const run_options& options,
                                                device_kind device,
                                                const std::optional<kernels::gpu_info>& gpu,
                                                int32_t ranks_per_gpu = 1);

} // namespace kvactor
