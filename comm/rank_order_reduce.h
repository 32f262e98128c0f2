// The reduction every host-memory transport uses: in rank order, ((r0 op r1) op r2) ..., so that
// every rank of every transport (in-process groups, sockets) gets the same bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kvactor/comm/communicator.h"

namespace kvactor::comm::detail {

template <class T>
T combine(T a, T b, reduce_op op) {
  switch (op) {
  case reduce_op::min: return std::min(a, b);
  case reduce_op::max: return std::max(a, b);
  case reduce_op::sum: break;
  }
  if constexpr (std::is_same_v<T, int64_t>) // wraps like NCCL's int64 sum, without UB
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

// out [count] = ((in[0] op in[1]) op in[2]) ...: one order, so every rank gets the same bits.
template <class T>
void reduce_in_rank_order(const std::vector<const void*>& in, size_t count, reduce_op op,
                          std::byte* out_bytes) {
  auto* out = reinterpret_cast<T*>(out_bytes);
  const auto* first = static_cast<const T*>(in[0]);
  std::copy(first, first + count, out);
  for (size_t r = 1; r < in.size(); ++r) {
    const auto* x = static_cast<const T*>(in[r]);
    for (size_t i = 0; i < count; ++i)
      out[i] = combine(out[i], x[i], op);
  }
}

/// The same over a dtype known at run time.
inline void reduce_in_rank_order(collective_dtype dtype, const std::vector<const void*>& in,
                                 size_t count, reduce_op op, std::byte* out) {
  if (dtype == collective_dtype::float32)
    reduce_in_rank_order<float>(in, count, op, out);
  else
    reduce_in_rank_order<int64_t>(in, count, op, out);
}

} // namespace kvactor::comm::detail
