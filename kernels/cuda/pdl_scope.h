// Internal: where kernel launches may be programmatic dependents (KVACTOR_PDL), parsed on the host
// so that a typo is an error (decoder_cuda::create refuses it) and the parse is tested without a
// GPU; launch_utils.cuh applies it at every launch.
#pragma once

#include <cstring>
#include <string>

#include "kvactor/kernels/cuda/cuda_check.h"

namespace kvactor::kernels::cuda_detail {

/// everywhere: KVACTOR_PDL unset, empty or "1" (the default). nowhere: "0", every launch a plain
/// one (a kernel starts once the previous one has ended; its griddepcontrol instructions do
/// nothing), for tools that cannot follow overlapping kernels and to tell a fault of the overlap
/// from one of a kernel. eager: "eager", programmatic dependents only outside stream capture, so
/// that CUDA graphs hold plain launches (graphs with them measured 1.5-1.9 % slower at some batch
/// sizes on an H100, bench/RESULTS.md).
enum class pdl_scope { everywhere, nowhere, eager };

/// KVACTOR_PDL's value (nullptr when unset) as a scope; any other value than the above is refused
/// with a message naming the variable and the value (*out then holds the default).
inline cuda_status parse_pdl_scope(const char* value, pdl_scope* out) {
  *out = pdl_scope::everywhere;
  if (value == nullptr || *value == '\0' || std::strcmp(value, "1") == 0) return {};
  if (std::strcmp(value, "0") == 0) {
    *out = pdl_scope::nowhere;
  } else if (std::strcmp(value, "eager") == 0) {
    *out = pdl_scope::eager;
  } else {
    return cuda_status::failure(cudaErrorInvalidValue,
                                std::string("KVACTOR_PDL=\"") + value
                                    + "\": expected 1 (the default), 0 or eager");
  }
  return {};
}

} // namespace kvactor::kernels::cuda_detail
