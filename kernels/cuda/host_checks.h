// Internal: pieces of the host-side argument checks shared by the launchers (kv_write_cuda,
// paged_attention_cuda, decoder_cuda), which report a rejected argument as a cuda_status.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "kvactor/kernels/cuda/cuda_check.h"
#include "kvactor/kernels/kv_cache_view.h"

namespace kvactor::kernels::cuda_detail {

/// True when p is a multiple of `bytes` (null is).
inline bool aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// Runs check(), a host check shared with the CPU code that throws std::invalid_argument, and
/// returns what it throws as a failed status: cudaErrorInvalidValue, `prefix` + its message.
template <class Check>
cuda_status check_as_status(Check&& check, const char* prefix = "") {
  try {
    check();
  } catch (const std::invalid_argument& e) {
    return detail::invalid_cuda_argument(prefix, e.what());
  }
  return {};
}

/// check_view (kv_cache_view.h) as a status.
inline cuda_status check_view_as_status(const kv_view& view, const char* what) {
  return check_as_status([&] { check_view(view, what); });
}

} // namespace kvactor::kernels::cuda_detail
