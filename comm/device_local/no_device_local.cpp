// The device-local communicator in a build without CUDA: every call says so, none crashes.
#include "kvactor/comm/device_local_communicator.h"

namespace kvactor::comm {

namespace {

constexpr const char* no_cuda =
    "this kvactor was built without CUDA: GPU ranks sharing a device need a CUDA build";

} // namespace

bool device_local_available(std::string* why_not) {
  if (why_not != nullptr) *why_not = no_cuda;
  return false;
}

std::vector<std::shared_ptr<communicator>>
make_device_local_group(int, int, std::chrono::milliseconds, size_t) {
  throw collective_error(collective_failure::transport, no_cuda);
}

} // namespace kvactor::comm
