// Host side of paged_attention_cuda: argument checks (before any CUDA call), the split-KV plan,
// and the launches (decode + prefill, or MLA; then the merge when keys are split).
#include "kvactor/kernels/cuda/paged_attention_cuda.h"

#include <algorithm>

#include "attention_args.h"
#include "host_checks.h"

namespace kvactor::kernels {
namespace {

using cuda_detail::attention_args;

constexpr int32_t max_splits = 64;
// A split keeps at least this many keys, so that every warp of its CTA has a pipeline to run.
constexpr int64_t decode_min_split_keys = 128;
constexpr int64_t mla_min_split_keys = 64;

bool aligned16(const void* p) {
  return cuda_detail::aligned(p, 16);
}

bool is_mla(const attention_params& p) {
  return p.head_size == 576;
}

int32_t device_sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess
      || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess
      || sms <= 0) {
    (void)cudaGetLastError(); // leave no error of ours behind
    return 132;
  }
  return sms;
}

bool device_is_hopper() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess
      || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess
      || cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
}

struct plan {
  int32_t row_chunks = 1; // decode CTAs along one KV head's rows
  int32_t num_splits = 1;
  size_t partial_rows = 0;    // rows of split partial results
  size_t bytes_per_split = 0; // workspace per split
};

// Fewest splits whose CTAs fill the GPU's waves about as well as any count can: the smallest
// count within 85% of the best wave efficiency (CTAs / (waves * slots)).
int32_t choose_splits(int64_t base_ctas, int64_t max_keys, int64_t min_split_keys, int64_t slots) {
  if (base_ctas <= 0) return 1;
  const auto limit = static_cast<int32_t>(
      std::clamp<int64_t>(max_keys / min_split_keys, int64_t{1}, int64_t{max_splits}));
  auto efficiency = [&](int32_t n) {
    const int64_t ctas = base_ctas * n;
    const int64_t waves = (ctas + slots - 1) / slots;
    return static_cast<double>(ctas) / static_cast<double>(waves * slots);
  };
  double best = 0.0;
  for (int32_t n = 1; n <= limit; ++n)
    best = std::max(best, efficiency(n));
  for (int32_t n = 1; n <= limit; ++n)
    if (efficiency(n) >= 0.85 * best) return n;
  return 1;
}

// The decode kernel's CTA rows per (request, KV head): its query heads, decode_rows at a time.
int32_t decode_row_chunks(const attention_params& p) {
  const int32_t group = p.num_q_heads / p.num_kv_heads;
  return std::max(1, (group + cuda_detail::decode_rows - 1) / cuda_detail::decode_rows);
}

plan make_plan(const attention_params& p, const kv_view& view, int32_t width, int32_t num_reqs,
               int32_t num_tokens, decode_shape decode) {
  plan pl;
  pl.row_chunks = decode_row_chunks(p);
  // Keys one row can see at most.
  int64_t max_keys = int64_t{width} * view.block_size;
  if (p.sliding_window > 0) max_keys = std::min<int64_t>(max_keys, p.sliding_window + 16);
  if (p.chunk_size > 0) max_keys = std::min<int64_t>(max_keys, p.chunk_size);
  const int64_t sms = device_sm_count();
  if (is_mla(p)) {
    const int64_t base = int64_t{num_tokens} * ((p.num_q_heads + 15) / 16);
    pl.num_splits =
        choose_splits(base, max_keys, mla_min_split_keys, sms * cuda_detail::mla_ctas_per_sm());
  } else {
    // Planned against one CTA per multiprocessor: a split CTA's keys then stream at the
    // multiprocessor's full share of bandwidth, and fewer splits make a cheaper merge (measured
    // on an H200: batch 1 x 4096 keys, 8 KV heads, is fastest with 16 splits, not 32).
    const int64_t base = int64_t{num_reqs} * p.num_kv_heads * pl.row_chunks;
    // A split counter per row group (r, CTA row): as many as the fixed region holds.
    pl.num_splits = base <= cuda_detail::split_counter_slots
                        ? choose_splits(base, max_keys, decode_min_split_keys, sms)
                        : 1;
    if (decode.splits > 0) pl.num_splits = decode.splits; // checked: within the counters
  }
  // Partial rows: MLA's are (token, q head); the decode kernel's are 16 per CTA row chunk.
  pl.partial_rows = is_mla(p) ? static_cast<size_t>(num_tokens) * p.num_q_heads
                              : static_cast<size_t>(num_reqs) * p.num_kv_heads * pl.row_chunks
                                    * cuda_detail::decode_rows;
  pl.bytes_per_split = pl.partial_rows * (p.v_size + 2) * sizeof(float);
  return pl;
}

cuda_status check_params(const attention_params& p, const kv_view& view) {
  const bool fp8 = view.type == element_type::fp8_e4m3;
  KVACTOR_CUDA_CHECK_ARG(view.type == element_type::bf16 || view.type == element_type::f16 || fp8,
                         "paged_attention_cuda: view.type: ", to_string(view.type),
                         " is not supported (bf16, f16 or fp8_e4m3)");
  // 16-byte copies: 8 elements of 16 bits, 16 of FP8.
  const int64_t per16 = fp8 ? 16 : 8;
  KVACTOR_CUDA_CHECK_ARG(view.block_size == 16 || view.block_size == 32 || view.block_size == 64,
                         "paged_attention_cuda: view.block_size: ", view.block_size,
                         " is not supported (16, 32 or 64)");
  KVACTOR_CUDA_CHECK_ARG(aligned16(view.base), "paged_attention_cuda: view.base: ", view.base,
                         " is not 16-byte aligned");
  KVACTOR_CUDA_CHECK_ARG(view.stride_block % per16 == 0 && view.stride_head % per16 == 0
                             && view.stride_token % per16 == 0,
                         "paged_attention_cuda: view strides: ", view.stride_block, ", ",
                         view.stride_head, ", ", view.stride_token, " are not all multiples of ",
                         per16, " elements (16 bytes)");
  if (cuda_status s = cuda_detail::check_as_status(
          [&] { check_attention_sizes(p, view, "paged_attention_cuda"); });
      !s)
    return s;
  if (is_mla(p)) {
    KVACTOR_CUDA_CHECK_ARG(!fp8, "paged_attention_cuda: view.type: fp8_e4m3 is not supported with "
                                 "head_size 576 (MLA) yet");
    KVACTOR_CUDA_CHECK_ARG(p.v_offset == 0 && p.v_size == 512,
                           "paged_attention_cuda: v_offset, v_size: ", p.v_offset, ", ", p.v_size,
                           " are not supported with head_size 576 (MLA: 0, 512)");
    KVACTOR_CUDA_CHECK_ARG(p.num_kv_heads == 1,
                           "paged_attention_cuda: num_kv_heads: ", p.num_kv_heads,
                           " is not supported with head_size 576 (MLA: 1)");
  } else {
    KVACTOR_CUDA_CHECK_ARG(p.head_size == 64 || p.head_size == 96 || p.head_size == 128
                               || p.head_size == 256,
                           "paged_attention_cuda: head_size: ", p.head_size,
                           " is not supported (64, 96, 128, 256, or 576 for MLA)");
    KVACTOR_CUDA_CHECK_ARG(p.v_size == p.head_size, "paged_attention_cuda: v_size: ", p.v_size,
                           " is not supported: it must equal head_size ", p.head_size);
    KVACTOR_CUDA_CHECK_ARG(p.v_offset % per16 == 0, "paged_attention_cuda: v_offset: ", p.v_offset,
                           " is not a multiple of ", per16);
  }
  return cuda_detail::check_as_status([&] { check_attention_scores(p, "paged_attention_cuda"); });
}

// Fixed decode splits: within the counters and the maximum, not with MLA.
cuda_status check_decode_shape(const attention_params& p, decode_shape decode, int32_t num_reqs) {
  KVACTOR_CUDA_CHECK_ARG(decode.splits >= 0 && decode.splits <= max_splits,
                         "paged_attention_cuda: decode.splits: ", decode.splits, " is outside [0, ",
                         max_splits, "] (0 plans them)");
  KVACTOR_CUDA_CHECK_ARG(
      !is_mla(p) || decode.splits == 0,
      "paged_attention_cuda: decode.splits: fixed splits are not supported with head_size 576 "
      "(MLA)");
  const int64_t row_groups = int64_t{num_reqs} * p.num_kv_heads * decode_row_chunks(p);
  KVACTOR_CUDA_CHECK_ARG(decode.splits <= 1 || row_groups <= cuda_detail::split_counter_slots,
                         "paged_attention_cuda: decode.splits: ", decode.splits, " needs at most ",
                         cuda_detail::split_counter_slots, " row groups; this call has ",
                         row_groups);
  return {};
}

} // namespace

cuda_status check_paged_attention_cuda(const attention_params& params, const kv_view& view,
                                       const void* q, const int32_t* query_start_loc,
                                       const int32_t* seq_lens, const int32_t* block_table,
                                       int32_t width, int32_t num_reqs, int32_t num_tokens,
                                       const void* out, cuda_workspace workspace,
                                       decode_shape decode) {
  if (cuda_status s = cuda_detail::check_view_as_status(view, "paged_attention_cuda: view"); !s)
    return s;
  if (cuda_status s = check_params(params, view); !s) return s;
  KVACTOR_CUDA_CHECK_ARG(num_reqs >= 0, "paged_attention_cuda: num_reqs: ", num_reqs,
                         " is negative");
  KVACTOR_CUDA_CHECK_ARG(num_tokens >= 0, "paged_attention_cuda: num_tokens: ", num_tokens,
                         " is negative");
  KVACTOR_CUDA_CHECK_ARG(width >= 0, "paged_attention_cuda: width: ", width, " is negative");
  if (cuda_status s = check_decode_shape(params, decode, num_reqs); !s) return s;
  KVACTOR_CUDA_CHECK_ARG(workspace.bytes == 0
                             || (workspace.data != nullptr && aligned16(workspace.data)),
                         "paged_attention_cuda: workspace.data: ", workspace.data,
                         " is null or not 16-byte aligned for ", workspace.bytes, " bytes");
  if (num_reqs == 0 || num_tokens == 0) return {};
  KVACTOR_CUDA_CHECK_ARG(query_start_loc != nullptr,
                         "paged_attention_cuda: query_start_loc: is null");
  KVACTOR_CUDA_CHECK_ARG(seq_lens != nullptr, "paged_attention_cuda: seq_lens: is null");
  KVACTOR_CUDA_CHECK_ARG(block_table != nullptr, "paged_attention_cuda: block_table: is null");
  KVACTOR_CUDA_CHECK_ARG(width > 0, "paged_attention_cuda: width: ", width,
                         " must be > 0 with requests");
  KVACTOR_CUDA_CHECK_ARG(q != nullptr && aligned16(q), "paged_attention_cuda: q: ", q,
                         " is null or not 16-byte aligned");
  KVACTOR_CUDA_CHECK_ARG(out != nullptr && aligned16(out), "paged_attention_cuda: out: ", out,
                         " is null or not 16-byte aligned");
  return {};
}

bool hopper_prefill_applies(const attention_params& params, const kv_view& view) {
#ifdef KVACTOR_HOPPER_KERNELS
  const bool sizes = params.head_size == 64 || params.head_size == 128 || params.head_size == 256;
  const bool types = view.type == element_type::bf16 || view.type == element_type::f16;
  return sizes && types && params.v_size == params.head_size && device_is_hopper();
#else
  (void)params;
  (void)view;
  return false;
#endif
}

size_t paged_attention_workspace_bytes(const attention_params& params, const kv_view& view,
                                       int32_t width, int32_t num_reqs, int32_t num_tokens,
                                       decode_shape decode) {
  if (width <= 0 || num_reqs <= 0 || num_tokens <= 0 || !check_params(params, view).ok()
      || !check_decode_shape(params, decode, num_reqs).ok())
    return 0;
  const plan pl = make_plan(params, view, width, num_reqs, num_tokens, decode);
  if (pl.num_splits > 1)
    return cuda_detail::split_counter_bytes
           + pl.bytes_per_split * static_cast<size_t>(pl.num_splits);
  // The Hopper prefill's persistent schedule keeps its counters in the same region.
  return hopper_prefill_applies(params, view) ? cuda_detail::split_counter_bytes : 0;
}

cuda_status paged_attention_cuda(const attention_params& params, const kv_view& view, const void* q,
                                 const int32_t* query_start_loc, const int32_t* seq_lens,
                                 const int32_t* block_table, int32_t width, int32_t num_reqs,
                                 int32_t num_tokens, void* out, cuda_workspace workspace,
                                 cudaStream_t stream, int32_t max_query_len, prefill_kernel prefill,
                                 decode_shape decode) {
  if (cuda_status s =
          check_paged_attention_cuda(params, view, q, query_start_loc, seq_lens, block_table, width,
                                     num_reqs, num_tokens, out, workspace, decode);
      !s)
    return s;
  if (num_reqs == 0 || num_tokens == 0) return {};

  plan pl = make_plan(params, view, width, num_reqs, num_tokens, decode);
  // A smaller workspace means fewer splits; none without one.
  if (pl.num_splits > 1 && pl.bytes_per_split > 0) {
    const size_t room = workspace.bytes > cuda_detail::split_counter_bytes
                            ? workspace.bytes - cuda_detail::split_counter_bytes
                            : 0;
    const size_t fit = room / pl.bytes_per_split;
    pl.num_splits = static_cast<int32_t>(std::min<size_t>(static_cast<size_t>(pl.num_splits), fit));
    if (pl.num_splits < 2) pl.num_splits = 1;
  }

  attention_args a{};
  a.q = q;
  a.out = out;
  a.cache = view.base;
  a.stride_block = view.stride_block;
  a.stride_head = view.stride_head;
  a.stride_token = view.stride_token;
  a.num_blocks = view.num_blocks;
  a.block_size = view.block_size;
  a.query_start_loc = query_start_loc;
  a.seq_lens = seq_lens;
  a.block_table = block_table;
  a.width = width;
  a.num_reqs = num_reqs;
  a.num_tokens = num_tokens;
  a.num_q_heads = params.num_q_heads;
  a.num_kv_heads = params.num_kv_heads;
  a.group = params.num_q_heads / params.num_kv_heads;
  a.head_size = params.head_size;
  a.v_offset = params.v_offset;
  a.v_size = params.v_size;
  a.softcap = params.softcap;
  // An FP8 cache's K scale multiplies every q . k, its V scale every output row.
  a.score_scale = (params.softcap > 0.0f ? params.scale / params.softcap
                                         : params.scale * cuda_detail::log2e_host)
                  * key_scale(view);
  a.out_scale = value_scale(view);
  a.softcap_log2 = params.softcap * cuda_detail::log2e_host;
  a.sliding_window = params.sliding_window;
  a.chunk_size = params.chunk_size;
  a.causal = params.causal ? 1 : 0;
  a.sinks = params.sinks;
  a.num_splits = pl.num_splits;
  a.row_chunks = pl.row_chunks;
  if (params.sliding_window == 0 && params.chunk_size == 0) {
    // Fixed key ranges per split (see attention_args::split_subtiles).
    const int64_t subtiles = (int64_t{width} * view.block_size + 15) / 16;
    a.split_subtiles = static_cast<int32_t>((subtiles + pl.num_splits - 1) / pl.num_splits);
  }
  if (pl.num_splits > 1) {
    a.split_counters = static_cast<int32_t*>(workspace.data);
    a.partial_out = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace.data)
                                             + cuda_detail::split_counter_bytes);
    a.partial_ml =
        a.partial_out
        + pl.partial_rows * static_cast<size_t>(pl.num_splits) * static_cast<size_t>(params.v_size);
  }

  // The prefill kernel, chosen before anything is launched.
  const bool hopper_asked =
      prefill == prefill_kernel::hopper || prefill == prefill_kernel::hopper_per_tile;
  const bool hopper =
      hopper_asked
      || (prefill == prefill_kernel::automatic && hopper_prefill_applies(params, view));
  KVACTOR_CUDA_CHECK_ARG(
      !hopper_asked || hopper_prefill_applies(params, view),
      "paged_attention_cuda: prefill: the Hopper kernel does not serve head_size ",
      params.head_size, " with a ", to_string(view.type), " cache on this build and device");

  // Launch order (NOTE(pdl)): the decode kernel first, a programmatic dependent that waits for
  // the stream's earlier work (the KV write) before it lets the next kernel be scheduled (its
  // split CTAs merge among themselves); then the prefill kernel, a programmatic dependent too,
  // which computes its disjoint rows at once (everything before the decode kernel has completed
  // by then) and waits for its predecessor before exiting. So the last kernel's completion is
  // the call's. MLA: its kernel, then the merge kernel when split.
  const bool fp8 = view.type == element_type::fp8_e4m3;
  const bool bf16 = view.type == element_type::bf16 || fp8; // q and out: bf16 with FP8
  const auto splits = static_cast<unsigned>(pl.num_splits);
  if (is_mla(params)) {
    const dim3 grid(static_cast<unsigned>(num_tokens),
                    static_cast<unsigned>((params.num_q_heads + 15) / 16), splits);
    if (cuda_status s = cuda_detail::launch_mla_decode(a, bf16, grid, stream); !s) return s;
    if (pl.num_splits > 1) return cuda_detail::launch_merge_splits(a, bf16, stream);
    return {};
  }
  const dim3 decode_grid(static_cast<unsigned>(num_reqs),
                         static_cast<unsigned>(params.num_kv_heads * pl.row_chunks), splits);
  if (cuda_status s = cuda_detail::launch_decode_attention(a, bf16, fp8, decode_grid, true, stream);
      !s)
    return s;
  // A bound that makes every request a decode: no prefill CTA would find work (each costs a
  // launch of ~3 us in a decode step).
  if (max_query_len > 0 && cuda_detail::is_decode_request(max_query_len, a.group)) return {};
  // Prefill tiles: request r's are query_start_loc[r] / tile + r + i (see prefill_attention.cu).
  if (hopper) {
    a.prefill_slots = num_tokens / cuda_detail::hopper_prefill_tile + num_reqs;
    dim3 grid(static_cast<unsigned>(a.prefill_slots), static_cast<unsigned>(params.num_q_heads));
    // The persistent schedule where the workspace holds its counters: as many CTAs as run at
    // once, never more than the items.
    if (prefill != prefill_kernel::hopper_per_tile
        && workspace.bytes >= cuda_detail::split_counter_bytes) {
      a.prefill_schedule = static_cast<int32_t*>(workspace.data) + cuda_detail::split_counter_slots;
      const int64_t items = int64_t{a.prefill_slots} * params.num_q_heads;
      const int64_t resident =
          int64_t{device_sm_count()} * cuda_detail::hopper_prefill_ctas_per_sm();
      grid = dim3(static_cast<unsigned>(std::min(items, resident)));
    }
    return cuda_detail::launch_prefill_attention_hopper(a, bf16, grid, true, stream);
  }
  const dim3 prefill_grid(static_cast<unsigned>(num_tokens / cuda_detail::prefill_tile + num_reqs),
                          static_cast<unsigned>(params.num_q_heads));
  return cuda_detail::launch_prefill_attention(a, bf16, fp8, prefill_grid, true, stream);
}

} // namespace kvactor::kernels
