// Kernels of the device-local communicator (collective_kernels.h). Grid-stride loops; each
// element is read from every rank and written to every rank by one thread, so in-place buffers
// are safe.
#include "collective_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace kvactor::kernels::detail {

namespace {

template <class T>
__device__ T combine(T a, T b, reduce_op op) {
  if (op == reduce_op::min) return b < a ? b : a;
  if (op == reduce_op::max) return a < b ? b : a;
  if constexpr (sizeof(T) == 8) // wraps like the host reduction, without UB
    return static_cast<T>(static_cast<unsigned long long>(a) + static_cast<unsigned long long>(b));
  else
    return __fadd_rn(a, b); // never contracted into an FMA: the host's bits
}

template <class T>
__global__ void reduce_to_all(rank_buffers p, size_t count, reduce_op op) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    T acc = static_cast<const T*>(p.in[0])[i];
    for (int r = 1; r < p.world; ++r)
      acc = combine(acc, static_cast<const T*>(p.in[r])[i], op);
    for (int r = 0; r < p.world; ++r)
      static_cast<T*>(p.out[r])[i] = acc;
  }
}

template <class T>
__global__ void gather_to_all(rank_buffers p, size_t count) {
  const size_t total = count * static_cast<size_t>(p.world);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < total;
       i += size_t{gridDim.x} * blockDim.x) {
    const T v = static_cast<const T*>(p.in[i / count])[i % count];
    for (int r = 0; r < p.world; ++r)
      static_cast<T*>(p.out[r])[i] = v;
  }
}

template <class T>
__global__ void broadcast_to_all(rank_buffers p, size_t count, int root) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const T v = static_cast<const T*>(p.in[root])[i];
    for (int r = 0; r < p.world; ++r)
      if (r != root) static_cast<T*>(p.out[r])[i] = v;
  }
}

template <class T>
void launch(collective_kind kind, reduce_op op, size_t count, int root, const rank_buffers& b,
            cudaStream_t s) {
  constexpr unsigned threads = 256;
  const size_t elements = kind == collective_kind::all_gather ? count * b.world : count;
  const auto blocks =
      static_cast<unsigned>(std::min<size_t>((elements + threads - 1) / threads, size_t{4} * 132));
  if (kind == collective_kind::all_reduce)
    reduce_to_all<T><<<blocks, threads, 0, s>>>(b, count, op);
  else if (kind == collective_kind::all_gather)
    gather_to_all<T><<<blocks, threads, 0, s>>>(b, count);
  else
    broadcast_to_all<T><<<blocks, threads, 0, s>>>(b, count, root);
}

} // namespace

int launch_collective(collective_kind kind, reduce_op op, collective_dtype dtype, size_t count,
                      int root, const rank_buffers& buffers, void* stream) {
  if (count == 0 || kind == collective_kind::barrier) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == collective_dtype::int64)
    launch<int64_t>(kind, op, count, root, buffers, s);
  else
    launch<float>(kind, op, count, root, buffers, s);
  return static_cast<int>(cudaGetLastError());
}

} // namespace kvactor::kernels::detail
