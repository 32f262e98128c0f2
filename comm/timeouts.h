// Internal: how the communicators (host, socket, NCCL) print a timeout in their errors.
#pragma once

#include <chrono>
#include <string>

namespace kvactor::comm::detail {

/// The duration in seconds, as the communicators' messages print it: "2 s", "0.5 s".
std::string seconds(std::chrono::milliseconds d);

} // namespace kvactor::comm::detail
