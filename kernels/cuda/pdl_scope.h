// Internal: where kernel launches may be programmatic dependents (KVACTOR_PDL), parsed on the host
// so that a typo is an error (decoder_cuda::create refuses it) and the parse is tested without a
// GPU; launch_utils.cuh applies it at every launch.
#pragma once

#include <cstring>

namespace kvactor::kernels::cuda_detail {

/// everywhere: KVACTOR_PDL unset, empty or "1" (the default). nowhere: "0", every launch a plain
/// one (a kernel starts once the previous one has ended; its griddepcontrol instructions do
/// nothing), for tools that cannot follow overlapping kernels and to tell a fault of the overlap
/// from one of a kernel. eager: "eager", programmatic dependents only outside stream capture, so
/// that CUDA graphs hold plain launches (graphs with them measured 1.5-1.9 % slower at some batch
/// sizes on an H100, bench/RESULTS.md).
enum class pdl_scope { everywhere, nowhere, eager };

/// KVACTOR_PDL's value (nullptr when unset) as a scope; false for any other value than the above.
inline bool parse_pdl_scope(const char* value, pdl_scope* out) {
  if (value == nullptr || *value == '\0' || std::strcmp(value, "1") == 0) {
    *out = pdl_scope::everywhere;
  } else if (std::strcmp(value, "0") == 0) {
    *out = pdl_scope::nowhere;
  } else if (std::strcmp(value, "eager") == 0) {
    *out = pdl_scope::eager;
  } else {
    *out = pdl_scope::everywhere;
    return false;
  }
  return true;
}

} // namespace kvactor::kernels::cuda_detail
