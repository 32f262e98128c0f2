// The kernels of the device-local communicator: one launch writes every rank's result. Internal
// to kernels/device_local/ (C++17 on both sides of nvcc; no CUDA types in the signature).
#pragma once

#include <cstddef>

#include "kvactor/kernels/communicator.h"
#include "kvactor/kernels/device_local_communicator.h"

namespace kvactor::kernels::detail {

/// Every rank's input and output buffer of one collective (device pointers), for `world` ranks.
struct rank_buffers {
  const void* in[max_device_local_ranks];
  void* out[max_device_local_ranks];
  int world;
};

/// Enqueues on `stream` (a cudaStream_t): all_reduce (out[r] = in[0] op in[1] op ... in rank
/// order, for every r), all_gather (out[r][s * count ..] = in[s]) or broadcast (out[r] =
/// in[root]). Returns the launch's cudaError_t as an int (0: success).
int launch_collective(collective_kind kind, reduce_op op, collective_dtype dtype, size_t count,
                      int root, const rank_buffers& buffers, void* stream);

} // namespace kvactor::kernels::detail
