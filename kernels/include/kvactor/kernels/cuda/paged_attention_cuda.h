// CUDA paged attention over a mixed batch (prefill chunks and decodes together), computing what
// paged_attention (paged_attention.h) computes, with q/out in the cache's element type (bf16 for
// an FP8 cache) and float accumulation.
//
// Supported: caches of bf16, f16 or fp8_e4m3 (dequantised to bf16 in shared memory, exactly;
// strides then multiples of 16 elements); kernel block sizes 16, 32, 64; head_size 64, 96, 128
// or 256 with v_size == head_size and V anywhere in the entry (v_offset a multiple of 8, of 16
// with FP8); and MLA (bf16 or f16 caches):
// head_size 576 (512 latent + 64 rope), v_offset 0, v_size 512, one KV head. Every feature of
// attention_params: GQA/MQA, causal or not, sliding window, chunked local, softcap, sinks.
//
// NOTE(determinism): a request's result depends on the batch only through the number of KV
// splits, which paged_attention_workspace_bytes and the launcher choose from (num_reqs, width,
// num_tokens) and the workspace: different batches may round differently (within float
// rounding), unlike the CPU reference, whose sums run in one fixed order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/kv_cache_view.h"
#include "kvactor/kernels/paged_attention.h"

namespace kvactor::kernels {

/// Device scratch memory for split-KV partial results and the Hopper prefill's schedule; 16-byte
/// aligned. Zero it once when it is allocated (cudaMemset): its first 16 KiB hold counters that
/// every call leaves at zero.
struct cuda_workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

/// Which kernel runs the requests the decode kernel does not take (prefill chunks).
enum class prefill_kernel : uint8_t {
  automatic, ///< hopper where hopper_prefill_applies, else mma_sync
  mma_sync,  ///< the portable tensor-core kernel (64-query tiles, mma.sync), every supported case
  hopper,    ///< the wgmma kernel (128-query tiles); an error where it does not apply. Persistent
             ///< (CTAs that take tile after tile) when the workspace has its 16 KiB of counters,
             ///< else one CTA per tile
  hopper_per_tile, ///< the wgmma kernel with one CTA per tile whatever the workspace
};

/// The decode kernel's grid, planned unless a benchmark or test fixes it.
struct decode_shape {
  /// KV splits per (request, KV head) row group: 0 plans them; 1..64 fixes them (fewer when the
  /// workspace holds fewer). Not with MLA.
  int32_t splits = 0;
};

/// True when the Hopper prefill kernel serves these arguments on the current device: a build
/// with the sm_90a target, a compute capability 9.0 device, a bf16 or f16 cache, head size 64,
/// 128 or 256 (not MLA). Its declared capabilities; everything else runs on mma_sync.
bool hopper_prefill_applies(const attention_params& params, const kv_view& view);

/// The workspace bytes paged_attention_cuda uses for these arguments: the split-KV partial
/// results and the counters (16 KiB) when it splits a request's keys across CTAs, the counters
/// alone where the Hopper prefill applies (its persistent schedule), else 0. Splitting depends on
/// the current device's multiprocessor count (132 when no device answers). 0 as well when the
/// arguments are not supported.
size_t paged_attention_workspace_bytes(const attention_params& params, const kv_view& view,
                                       int32_t width, int32_t num_reqs, int32_t num_tokens,
                                       decode_shape decode = {});

/// Attention of every query token of the batch, written to `out` as paged_attention defines it.
/// A request with query_len == 1, or query_len * (num_q_heads / num_kv_heads) <= 16, runs on the
/// decode kernel (one CTA per request, KV head and KV split, all q heads of the GQA group
/// together); every other request on a prefill kernel (see prefill_kernel). MLA
/// runs every token on its own kernel. Up to two launches on `stream` (decode kernel, whose split
/// CTAs merge among themselves, then prefill; MLA: its kernel, then a merge when split), the
/// later one as a programmatic dependent launch; the call is stream-ordered
/// like one kernel: it starts after the stream's earlier work and its last launch completes only
/// after all of its work. Capturable into a CUDA graph.
///
///   q               // [num_tokens, num_q_heads, head_size]  device, view.type, 16-byte aligned
///   query_start_loc // [num_reqs + 1] device indptr, query_start_loc[0] == 0
///   seq_lens        // [num_reqs] device
///   block_table     // [num_reqs, width] device kernel block ids
///   out             // [num_tokens, num_q_heads, v_size] device, view.type, 16-byte aligned
///   params.sinks    // [num_q_heads] device floats, or nullptr
///   workspace       // device; any size: the launcher splits less when it is smaller than
///                   // paged_attention_workspace_bytes (never when it is empty)
///   max_query_len   // host: a bound on every request's query_len, or 0 (unknown); when it
///                   // makes every request a decode, the prefill kernel is not launched
///   prefill         // which prefill kernel (benchmarks and tests compare them)
///   decode          // the decode kernel's grid (benchmarks and tests compare them)
///
/// Rows of q/out at or past query_start_loc[num_reqs] (<= num_tokens) are neither read nor
/// written. Returns a failed status (cudaErrorInvalidValue, naming the argument and its value)
/// before any CUDA call when a host-visible argument is inconsistent or unsupported, or the CUDA
/// call that failed. The device arrays cannot be checked on the host: REQUIRES that they hold
/// what check_paged_attention accepts; a block id outside [0, num_blocks) then reads as zeros and
/// a slot of an invalid request is not written, but nothing is reported.
cuda_status paged_attention_cuda(const attention_params& params, const kv_view& view, const void* q,
                                 const int32_t* query_start_loc, const int32_t* seq_lens,
                                 const int32_t* block_table, int32_t width, int32_t num_reqs,
                                 int32_t num_tokens, void* out, cuda_workspace workspace,
                                 cudaStream_t stream, int32_t max_query_len = 0,
                                 prefill_kernel prefill = prefill_kernel::automatic,
                                 decode_shape decode = {});

/// Runs exactly the host argument checks of paged_attention_cuda and nothing else (no CUDA call).
cuda_status check_paged_attention_cuda(const attention_params& params, const kv_view& view,
                                       const void* q, const int32_t* query_start_loc,
                                       const int32_t* seq_lens, const int32_t* block_table,
                                       int32_t width, int32_t num_reqs, int32_t num_tokens,
                                       const void* out, cuda_workspace workspace,
                                       decode_shape decode = {});

} // namespace kvactor::kernels
