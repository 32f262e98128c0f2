// One paged-attention scenario run on the GPU and on the CPU reference (paged_attention) from the
// same bf16/f16/FP8 cache and queries, compared by relative L2 error.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kvactor/kernels/cuda/paged_attention_cuda.h"
#include "kvactor/kernels/kv_cache_view.h"

namespace kvactor::kernels::gpu_test {

struct attention_case {
  element_type type = element_type::bf16; // of the cache; q and out too but bf16 for fp8_e4m3
  float k_scale = 1.0f, v_scale = 1.0f;   // fp8_e4m3: K/V are stored over these scales
  int32_t hq = 32, hkv = 8, d = 128;
  bool mla = false; // d = 576: content is the latent + rope, V its first 512 elements
  int32_t block_size = 16;
  int32_t window = 0, chunk = 0;
  float softcap = 0.0f;
  bool sinks = false;
  bool causal = true;
  bool bnhc = false; // [block, token, head, content] layout instead of [block, head, token, ...]
  // Per request: (tokens cached by earlier steps, tokens of this step).
  std::vector<std::pair<int32_t, int32_t>> reqs{{40, 1}, {0, 20}};
  int32_t padding = 0;       // query rows past the batch: must stay untouched
  bool workspace = true;     // give the launcher what paged_attention_workspace_bytes asks for
  size_t workspace_cap = 0;  // > 0: at most this many bytes of it (the launcher splits less)
  int32_t max_query_len = 0; // passed to the launcher (0: unknown)
  prefill_kernel prefill = prefill_kernel::automatic;
  decode_shape decode;  // the decode kernel's grid (planned by default)
  float q_range = 2.0f; // q uniform in [-q_range, q_range), K/V in [-1, 1)
  uint32_t seed = 1;
};

struct attention_outcome {
  double rel_l2 = 0.0;             // || gpu - reference || / || reference || over the batch rows
  int64_t nan_values = 0;          // NaN or infinity among the batch rows (unwritten rows are NaN)
  int64_t padding_overwritten = 0; // elements of padding rows that changed
  int64_t repeat_differs = 0;      // elements a second call on the same workspace changed
  size_t workspace_bytes = 0;      // what paged_attention_workspace_bytes asked for
};

/// Builds the scenario (random cache and queries, shuffled non-contiguous block tables, blocks a
/// window or chunk released set to -1, unwritten cache entries NaN), runs both, compares.
/// Adds a gtest failure and returns early when the launcher or a CUDA call fails.
attention_outcome run_attention_case(const attention_case& c);

/// Runs the case and expects no NaN, untouched padding rows, a repeat call equal to the first, and
/// a relative L2 error within `tolerance` (bf16/f16 inputs, float accumulation); records rel_l2.
void expect_matches(const attention_case& c, double tolerance = 1e-2);

} // namespace kvactor::kernels::gpu_test
