// One case of kvactor_attention_bench on the current device: a random paged batch, the call to
// paged_attention_cuda captured in a CUDA graph and timed over replays after an L2 flush, the
// whole output scanned for NaN/inf, and sampled rows compared with the CPU reference.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "attention_bench_cases.hpp"
#include "bench_gpu.hpp"
#include "kvactor/kernels/cuda/paged_attention_cuda.h"

namespace kvactor::bench {

/// Where (block, head, token) entries sit in the cache; each entry holds K then V (content 256).
enum class cache_layout {
  hnd, // [block, kv_head, token, K|V]: kvactor's default (LBHNC)
  nhd, // [block, token, kv_head, K|V]: vLLM's ordering of a page
};

struct run_options {
  int32_t warmup = 3;
  int32_t replays = 60;
  int32_t check_rows = 64; // (query token, KV head) rows compared with the CPU reference
  cache_layout layout = cache_layout::hnd;
  double pool_factor = 1.5; // cache blocks per block the batch needs: ids scattered over more
  uint64_t seed = 1;
  kernels::decode_shape decode; // the decode kernel's grid: planned unless fixed
};

struct case_result {
  timing time;
  double rel_l2 = 0.0;      // || gpu - reference || / || reference || over the checked rows
  int64_t rows_checked = 0; // (query token, KV head) rows, each with every q head of its group
  int64_t rows_total = 0;   // num_tokens x num_kv_heads
  int64_t nonfinite = 0;    // NaN or inf anywhere in the output after the last replay
  size_t workspace_bytes = 0;
  size_t device_bytes = 0; // this case's allocations
  size_t device_used = 0;  // cudaMemGetInfo's total - free while the case was allocated
};

/// Runs case c. Throws std::runtime_error when a CUDA call or the launcher fails.
case_result run_case(const bench_case& c, const run_options& o, l2_flusher& flush,
                     cudaStream_t stream);

} // namespace kvactor::bench
