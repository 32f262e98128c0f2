// Kernels of the device-local communicator (collective_kernels.h): the eager one-launch kernels,
// and the graphs' copy-in, meet and finish.
#include "collective_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace kvactor::comm::detail {

namespace {

constexpr int max_ranks = max_device_local_ranks;
constexpr unsigned threads = 256;
constexpr unsigned max_blocks = 4 * 132;

// Signature fields: count in bits 0-39, kind 40-42, op 43-45, dtype 46-48, root + 1 49-53.
constexpr uint64_t count_bits = 40;

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

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <class T>
__device__ const T* slot_of(const group_sync& g, unsigned long long round, int rank) {
  const size_t at =
      ((round & 1) * static_cast<size_t>(g.world) + static_cast<size_t>(rank)) * g.slot_bytes;
  return reinterpret_cast<const T*>(static_cast<const char*>(g.slots) + at);
}

// Rank `rank`'s part of the next round into its slot.
template <class T>
__global__ void copy_in(group_sync g, int rank, const T* src, size_t n) {
  T* dst = const_cast<T*>(slot_of<T>(g, g.round[rank] + 1, rank));
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

__device__ void report(const group_sync& g, int rank, meet_failure f, unsigned long long round,
                       uint64_t missing, int peer, uint64_t theirs, uint64_t ours) {
  g.failed[rank] = static_cast<int32_t>(f);
  meet_report& r = g.reports[rank];
  r.peer = peer;
  r.round = round;
  r.missing = missing;
  r.theirs = theirs;
  r.ours = ours;
  __threadfence_system();
  *reinterpret_cast<volatile int32_t*>(&r.failure) = static_cast<int32_t>(f);
  __threadfence_system();
}

// One thread: arrive at the next round, wait for every rank, compare what they entered.
__global__ void meet(group_sync g, int rank, uint64_t signature, int64_t timeout_ns) {
  if (threadIdx.x != 0) return;
  const unsigned long long k = g.round[rank] + 1;
  g.round[rank] = k;
  if (g.failed[rank] != 0) return;
  volatile unsigned long long* entered = g.entered + (k & 1) * max_ranks;
  entered[rank] = signature;
  __threadfence();
  atomicExch(&g.arrived[rank], k);
  const volatile unsigned long long* arrived = g.arrived;
  const uint64_t start = now_ns();
  for (;;) {
    uint64_t missing = 0;
    for (int r = 0; r < g.world; ++r)
      if (arrived[r] < k) missing |= uint64_t{1} << r;
    if (missing == 0) break;
    if (*g.abort != 0) return report(g, rank, meet_failure::aborted, k, missing, -1, 0, 0);
    if (static_cast<int64_t>(now_ns() - start) > timeout_ns)
      return report(g, rank, meet_failure::timeout, k, missing, -1, 0, 0);
    __nanosleep(200);
  }
  __threadfence();
  for (int r = 1; r < g.world; ++r)
    if (entered[r] != entered[0])
      return report(g, rank, meet_failure::mismatch, k, 0, r, entered[r], entered[0]);
}

template <class T>
__global__ void reduce_slots(group_sync g, int rank, T* out, size_t n, reduce_op op) {
  if (g.failed[rank] != 0) return;
  const unsigned long long k = g.round[rank];
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    T acc = __ldcg(slot_of<T>(g, k, 0) + i);
    for (int r = 1; r < g.world; ++r)
      acc = combine(acc, __ldcg(slot_of<T>(g, k, r) + i), op);
    out[i] = acc;
  }
}

// out[s * stride + i] = rank s's slot[i].
template <class T>
__global__ void gather_slots(group_sync g, int rank, T* out, size_t n, size_t stride) {
  if (g.failed[rank] != 0) return;
  const unsigned long long k = g.round[rank];
  const size_t total = n * static_cast<size_t>(g.world);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < total;
       i += size_t{gridDim.x} * blockDim.x) {
    const int s = static_cast<int>(i / n);
    out[static_cast<size_t>(s) * stride + i % n] = __ldcg(slot_of<T>(g, k, s) + i % n);
  }
}

template <class T>
__global__ void copy_out(group_sync g, int rank, int from, T* out, size_t n) {
  if (g.failed[rank] != 0) return;
  const unsigned long long k = g.round[rank];
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = __ldcg(slot_of<T>(g, k, from) + i);
}

unsigned blocks_for(size_t elements) {
  return static_cast<unsigned>(
      std::max<size_t>(1, std::min<size_t>((elements + threads - 1) / threads, max_blocks)));
}

template <class T>
void enqueue(const group_sync& g, int rank, collective_kind kind, reduce_op op, size_t count,
             int root, const T* in, T* out, uint64_t signature, int64_t timeout_ns,
             cudaStream_t s) {
  const size_t per_round = g.slot_bytes / sizeof(T);
  const uint64_t rounds = rounds_of(
      count, sizeof(T) == 8 ? collective_dtype::int64 : collective_dtype::float32, g.slot_bytes);
  for (uint64_t r = 0; r < rounds; ++r) {
    const size_t first = r * per_round;
    const size_t n = count == 0 ? 0 : std::min(per_round, count - first);
    const bool sends = kind != collective_kind::broadcast || rank == root;
    if (n > 0 && sends) copy_in<T><<<blocks_for(n), threads, 0, s>>>(g, rank, in + first, n);
    meet<<<1, 32, 0, s>>>(g, rank, signature, timeout_ns);
    if (n == 0) continue;
    if (kind == collective_kind::all_reduce)
      reduce_slots<T><<<blocks_for(n), threads, 0, s>>>(g, rank, out + first, n, op);
    else if (kind == collective_kind::all_gather)
      gather_slots<T><<<blocks_for(n * g.world), threads, 0, s>>>(g, rank, out + first, n, count);
    else if (rank != root)
      copy_out<T><<<blocks_for(n), threads, 0, s>>>(g, rank, root, out + first, n);
  }
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

uint64_t collective_signature(collective_kind kind, reduce_op op, collective_dtype dtype,
                              size_t count, int root) {
  const uint64_t c = static_cast<uint64_t>(count) & ((uint64_t{1} << count_bits) - 1);
  return c | (static_cast<uint64_t>(kind) << 40) | (static_cast<uint64_t>(op) << 43)
         | (static_cast<uint64_t>(dtype) << 46) | (static_cast<uint64_t>(root + 1) << 49);
}

void unpack_signature(uint64_t sig, collective_kind& kind, reduce_op& op, collective_dtype& dtype,
                      size_t& count, int& root) {
  count = static_cast<size_t>(sig & ((uint64_t{1} << count_bits) - 1));
  kind = static_cast<collective_kind>((sig >> 40) & 7);
  op = static_cast<reduce_op>((sig >> 43) & 7);
  dtype = static_cast<collective_dtype>((sig >> 46) & 7);
  root = static_cast<int>((sig >> 49) & 31) - 1;
}

uint64_t rounds_of(size_t count, collective_dtype dtype, size_t slot_bytes) {
  const size_t per_round = slot_bytes / size_of(dtype);
  return count == 0 ? 1 : (count + per_round - 1) / per_round;
}

int enqueue_collective(const group_sync& g, int rank, collective_kind kind, reduce_op op,
                       collective_dtype dtype, size_t count, int root, const void* in, void* out,
                       int64_t timeout_ns, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const uint64_t sig = collective_signature(kind, op, dtype, count, root);
  if (dtype == collective_dtype::int64)
    enqueue<int64_t>(g, rank, kind, op, count, root, static_cast<const int64_t*>(in),
                     static_cast<int64_t*>(out), sig, timeout_ns, s);
  else
    enqueue<float>(g, rank, kind, op, count, root, static_cast<const float*>(in),
                   static_cast<float*>(out), sig, timeout_ns, s);
  return static_cast<int>(cudaGetLastError());
}

} // namespace kvactor::comm::detail
