// Merge kernel of the MLA kernel's split-KV (the decode kernel merges in its last CTA). Launched
// with PDL right after the split kernel: it lets the next kernel be scheduled, waits for the
// split kernel, then combines each row's splits (split_merge.cuh) and writes the row: one CTA of
// v_size / 4 threads per (token, q head).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention_args.h"
#include "device_utils.cuh"
#include "launch_utils.cuh"
#include "split_merge.cuh"

namespace kvactor::kernels::cuda_detail {
namespace {

// grid (num_tokens, num_q_heads), v_size / 4 threads.
template <class T>
__global__ void __launch_bounds__(128) merge_by_token_kernel(const attention_args a) {
  pdl_launch_dependents();
  pdl_wait_for_predecessor();
  const int t = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  if (t >= a.query_start_loc[a.num_reqs]) return;
  const int r = request_of_token(a, t);
  if (a.seq_lens[r] < a.query_start_loc[r + 1] - a.query_start_loc[r]) return;
  const int64_t row = static_cast<int64_t>(t) * a.num_q_heads + h;
  const int col = 4 * static_cast<int>(threadIdx.x);
  store4<T>(a, row, col, merge_row(a, row, h, col));
}

template <class T>
cuda_status launch_typed(const attention_args& a, cudaStream_t stream) {
  const auto per_row = static_cast<unsigned>(a.v_size / 4);
  const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_q_heads));
  return launch_kernel(merge_by_token_kernel<T>, grid, per_row, 0, true, stream, a);
}

} // namespace

cuda_status launch_merge_splits(const attention_args& a, bool bf16, cudaStream_t stream) {
  return dispatch_half_type(
      bf16, [&](auto type) { return launch_typed<typename decltype(type)::type>(a, stream); });
}

} // namespace kvactor::kernels::cuda_detail
