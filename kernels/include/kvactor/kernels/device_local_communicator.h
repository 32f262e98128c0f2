// The device-local communicator: tensor-parallel GPU ranks of one process that share one GPU, a
// testing and debugging mode (NCCL refuses two ranks on one device). Buffers are device memory of
// that GPU; a collective is enqueued on the rank's stream and returns once enqueued, as NCCL's
// do, and synchronize() waits for it with the timeout.
//
// One collective, in stream order:
//   1. each rank records an event on its stream and meets the others on the host (a host
//      communicator group underneath: its deadlines, its abort, a timeout naming the ranks that
//      never came); they exchange what they entered and their buffers;
//   2. every rank checks that all entered the same collective (else a mismatch error on every
//      rank, naming both);
//   3. rank 0 makes its stream wait for every rank's event and launches one kernel that reads
//      every rank's input and writes every rank's output, reducing in rank order
//      (((r0 op r1) op r2) ...), the order host_communicator uses: every rank gets the same bits;
//   4. the ranks meet again, and each one's stream waits for the event rank 0 recorded after the
//      kernel.
// GPU work never waits for a peer here, so only the host meetings can time out. Plain C++ (no
// CUDA headers): built from kernels/device_local/ with CUDA, else every call says that this build
// has no CUDA.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvactor/kernels/communicator.h"

namespace kvactor::kernels {

/// The most ranks a device-local group may have (the kernel takes every rank's buffer at once).
inline constexpr int max_device_local_ranks = 8;

/// True when this build can create device-local groups; otherwise false with `why_not` set.
bool device_local_available(std::string* why_not);

/// One communicator per rank of a new group of `world_size` ranks on CUDA device `device`; a
/// meeting that waits longer than `timeout` for its peers fails. Each rank must use its
/// communicator from its own thread. Throws collective_error: invalid_argument (world_size
/// outside [1, max_device_local_ranks], timeout not positive), transport (no CUDA in this build,
/// or the device cannot be used).
std::vector<std::shared_ptr<communicator>>
make_device_local_group(int world_size, int device, std::chrono::milliseconds timeout);

} // namespace kvactor::kernels
