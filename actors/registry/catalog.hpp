// The backends kvactor ships, described by their declared capabilities.
#pragma once

#include <vector>

#include "messages/backend.hpp"

namespace kvactor {

/// reference (CPU oracle, every attention kind), paged (our CUDA family: kernel blocks of any
/// multiple of 16, FULL graphs for any batch), mla (latent attention on CUDA, FULL graphs for
/// uniform batches) and state (Mamba / linear-attention state, CPU and CUDA).
std::vector<backend_capabilities> builtin_backends();

} // namespace kvactor
