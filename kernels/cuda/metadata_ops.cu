// Device metadata kernels (metadata_cuda.h). Tiny and memory-bound: one thread per output entry.
#include <cuda_runtime.h>

#include "kvactor/kernels/cuda/metadata_cuda.h"

namespace kvactor::kernels {

namespace {

// The request owning token t: the last r with query_start_loc[r] <= t (binary search).
__device__ int32_t owner(const int32_t* qsl, int32_t num_reqs, int32_t t) {
  int32_t lo = 0, hi = num_reqs - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (qsl[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void slot_mapping_kernel(const int32_t* qsl, const int64_t* positions,
                                    const int32_t* table, int32_t width, int32_t num_reqs,
                                    int32_t kbs, int64_t* out, int32_t out_len) {
  const int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= out_len) return;
  if (num_reqs == 0 || t >= qsl[num_reqs]) {
    out[t] = -1;
    return;
  }
  const int32_t r = owner(qsl, num_reqs, t);
  const int64_t p = positions[t];
  const int64_t block = table[static_cast<int64_t>(r) * width + p / kbs];
  out[t] = block * kbs + p % kbs;
}

__global__ void update_table_kernel(int32_t* table, int32_t width, const int32_t* rows,
                                    const int32_t* starts, const int32_t* offsets,
                                    const int32_t* ids) {
  const int32_t u = blockIdx.x;
  const int32_t begin = offsets[u], end = offsets[u + 1];
  int32_t* row = table + static_cast<int64_t>(rows[u]) * width + starts[u];
  for (int32_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    row[i - begin] = ids[i];
}

__global__ void gather_rows_kernel(const float* hidden, int32_t hidden_size, const int32_t* indices,
                                   float* out) {
  const int32_t i = blockIdx.x;
  const float* src = hidden + static_cast<int64_t>(indices[i]) * hidden_size;
  float* dst = out + static_cast<int64_t>(i) * hidden_size;
  for (int32_t c = threadIdx.x; c < hidden_size; c += blockDim.x)
    dst[c] = src[c];
}

} // namespace

cuda_status slot_mapping_cuda(const int32_t* query_start_loc, const int64_t* positions,
                              const int32_t* block_table, int32_t width, int32_t num_reqs,
                              int32_t kernel_block_size, int64_t* out, int32_t out_len,
                              cudaStream_t stream) {
  KVACTOR_CUDA_CHECK_ARG(num_reqs >= 0, "slot_mapping_cuda: num_reqs: ", num_reqs, " is negative");
  KVACTOR_CUDA_CHECK_ARG(out_len >= 0, "slot_mapping_cuda: out_len: ", out_len, " is negative");
  KVACTOR_CUDA_CHECK_ARG(kernel_block_size >= 1,
                         "slot_mapping_cuda: kernel_block_size: ", kernel_block_size,
                         " is not positive");
  KVACTOR_CUDA_CHECK_ARG(num_reqs == 0 || width >= 1, "slot_mapping_cuda: width: ", width, " with ",
                         num_reqs, " requests");
  KVACTOR_CUDA_CHECK_ARG(query_start_loc != nullptr, "slot_mapping_cuda: query_start_loc: is null");
  KVACTOR_CUDA_CHECK_ARG(num_reqs == 0 || (positions != nullptr && block_table != nullptr),
                         "slot_mapping_cuda: positions / block_table: null with ", num_reqs,
                         " requests");
  KVACTOR_CUDA_CHECK_ARG(out_len == 0 || out != nullptr, "slot_mapping_cuda: out: is null");
  if (out_len == 0) return {};
  constexpr int threads = 256;
  slot_mapping_kernel<<<(out_len + threads - 1) / threads, threads, 0, stream>>>(
      query_start_loc, positions, block_table, width, num_reqs, kernel_block_size, out, out_len);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

cuda_status update_block_table_cuda(int32_t* block_table, int32_t width, int32_t num_rows,
                                    const int32_t* rows, const int32_t* starts,
                                    const int32_t* offsets, const int32_t* ids, int32_t num_updates,
                                    cudaStream_t stream) {
  KVACTOR_CUDA_CHECK_ARG(num_updates >= 0, "update_block_table_cuda: num_updates: ", num_updates,
                         " is negative");
  KVACTOR_CUDA_CHECK_ARG(width >= 1, "update_block_table_cuda: width: ", width, " is not positive");
  KVACTOR_CUDA_CHECK_ARG(num_rows >= 0, "update_block_table_cuda: num_rows: ", num_rows,
                         " is negative");
  if (num_updates == 0) return {};
  KVACTOR_CUDA_CHECK_ARG(block_table != nullptr && rows != nullptr && starts != nullptr
                             && offsets != nullptr && ids != nullptr,
                         "update_block_table_cuda: a pointer is null with ", num_updates,
                         " updates");
  update_table_kernel<<<num_updates, 128, 0, stream>>>(block_table, width, rows, starts, offsets,
                                                       ids);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

cuda_status gather_rows_cuda(const float* hidden, int32_t hidden_size, const int32_t* indices,
                             int32_t count, float* out, cudaStream_t stream) {
  KVACTOR_CUDA_CHECK_ARG(count >= 0, "gather_rows_cuda: count: ", count, " is negative");
  KVACTOR_CUDA_CHECK_ARG(hidden_size >= 1, "gather_rows_cuda: hidden_size: ", hidden_size,
                         " is not positive");
  if (count == 0) return {};
  KVACTOR_CUDA_CHECK_ARG(hidden != nullptr && indices != nullptr && out != nullptr,
                         "gather_rows_cuda: a pointer is null with count ", count);
  gather_rows_kernel<<<count, 256, 0, stream>>>(hidden, hidden_size, indices, out);
  KVACTOR_CUDA_CALL(cudaGetLastError());
  return {};
}

} // namespace kvactor::kernels
