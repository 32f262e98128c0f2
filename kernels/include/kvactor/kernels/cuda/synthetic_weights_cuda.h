// The synthetic weight hash (synthetic_weights.h) evaluated on the device: the port the CUDA
// attention stack generates its weights with, exposed so that tests can compare it with the
// host function bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/synthetic_weights.h"

namespace kvactor::kernels {

/// The arguments of one synthetic_uniform call.
struct synthetic_coord {
  uint64_t seed = 0;
  weight_matrix matrix = weight_matrix::embedding;
  int32_t layer = 0;
  int64_t row = 0, col = 0;
};

/// out[i] = synthetic_uniform(c.seed, c.matrix, c.layer, c.row, c.col) with c = coords[i],
/// computed on the device; bit-identical to the host function.
///   coords // [n] device
///   out    // [n] device
/// Returns a failed status naming the argument (n negative, a null pointer with n > 0) before
/// any CUDA call, or the CUDA call that failed. Asynchronous on `stream`.
cuda_status synthetic_uniform_cuda(const synthetic_coord* coords, int64_t n, float* out,
                                   cudaStream_t stream);

} // namespace kvactor::kernels
