// A checkpoint's slice for this rank into the GPU decoder's device tensors, through pinned
// staging: host threads convert each copy of the plan (hf_decoder_plan.hpp) into one of two
// pinned buffers while the other one is in flight to the device, so the file read, the
// conversion and the PCIe copy overlap. Progress is reported at most every `interval`.
#pragma once

#include <memory>
#include <vector>

#include "actors/rank/upload_progress.hpp"
#include "kvactor/kernels/cuda/decoder_cuda.h"
#include "messages/errc.hpp"
#include "model/hf_decoder_plan.hpp"

namespace kvactor {

/// Fills every device tensor `plan` names; waits until the last copy has landed. Errors name the
/// tensor (and layer) whose copy failed and the CUDA call.
expected<upload_progress> upload_weights(const std::vector<weight_copy>& plan,
                                         kernels::decoder_cuda& decoder,
                                         const upload_options& options);

/// --load-format synthetic on the GPU: every device tensor `plan` names (from a shapes-only
/// checkpoint) generated on the device, the values the CPU would generate for `cfg` and `seed`
/// (generated_tensor_of), sliced as the plan says; no host copy of the weights. Waits for them.
expected<upload_progress> generate_weights(const std::vector<weight_copy>& plan,
                                           kernels::decoder_cuda& decoder,
                                           const hf_decoder_config& cfg, uint64_t seed);

/// A decoder_cuda for `cfg`'s rank on options.stream (which the caller owns), its weights planned
/// from `weights.ckpt` and uploaded or generated; options' tp_size and tied_lm_head come from
/// `cfg`. The one way a checkpoint becomes a GPU decoder (the executor, its tests and the bench).
expected<std::unique_ptr<kernels::decoder_cuda>>
load_decoder_cuda(const hf_decoder_config& cfg, const gpu_weight_source& weights,
                  kernels::decoder_cuda_options options);

} // namespace kvactor
