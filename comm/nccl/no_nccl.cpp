// The NCCL communicator in a build without NCCL: every call says so, none crashes.
#include "kvactor/comm/nccl_communicator.h"

namespace kvactor::comm {

namespace {

constexpr const char* no_nccl = "this kvactor was built without NCCL (CUDA or nccl.h and libnccl "
                                "were not found at configure time)";

} // namespace

bool nccl_available(std::string* why_not) {
  if (why_not != nullptr) *why_not = no_nccl;
  return false;
}

std::vector<char> nccl_unique_id() {
  throw collective_error(collective_failure::transport, no_nccl);
}

std::shared_ptr<communicator> make_nccl_communicator(const std::vector<char>&, int, int,
                                                     const nccl_options&) {
  throw collective_error(collective_failure::transport, no_nccl);
}

} // namespace kvactor::comm
