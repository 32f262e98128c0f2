// The rank's synthetic attention stack, shaped by the model (docs/design.md, "The workload a
// rank executes"), and the bridge from KV cache views to kernel views.
#pragma once

#include <string>
#include <vector>

#include "kvactor/kernels/attention_stack.h"
#include "messages/errc.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"

namespace kvactor {

/// The greedy projection's width: the model's vocabulary, capped to keep CPU steps cheap.
inline constexpr int32_t max_workload_vocab = 4096;

/// Stack layers for every attention layer of `model` (KV-sharing layers read their target's
/// cache). Fails naming the layer for kinds the CPU workload cannot run yet (Mamba / linear
/// attention state, cross attention, encoder-only).
expected<kernels::stack_config> stack_config_for(const model_layout& model, uint64_t seed);

/// A kernel view over `base` for one planned layer view.
expected<kernels::kv_view> kernel_view(std::byte* base, const kv_cache_view& view);

} // namespace kvactor
