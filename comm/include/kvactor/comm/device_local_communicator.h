// The device-local communicator: tensor-parallel GPU ranks of one process that share one GPU, a
// testing and debugging mode (NCCL refuses two ranks on one device). Buffers are device memory of
// that GPU; a collective is enqueued on the rank's stream and returns once enqueued, as NCCL's
// do, and synchronize() waits for it with the timeout.
//
// Eagerly, the ranks meet on the host (a host communicator group underneath: its deadlines, its
// abort, a timeout naming the ranks that never came) and exchange what they entered and their
// buffers; every rank checks that all entered the same collective (else a mismatch error on every
// rank, naming both); rank 0's stream waits for every rank's inputs (events) and runs one kernel
// that reads every rank's input and writes every rank's output, reducing in rank order
// (((r0 op r1) op r2) ...), the order host_communicator uses, so every rank gets the same bits;
// every rank's stream then waits for that kernel. No eager kernel waits for a peer.
//
// A collective captured into a CUDA graph has no host in the loop: it meets on the device
// (comm/device_local/collective_kernels.h). In rounds of at most one slot, each rank copies its
// part into a slot the group owns, a one-thread kernel posts its arrival and waits for every
// peer's (a deadline and the abort flag end the wait, and the error names the missing ranks or
// the mismatch), then each rank reduces every slot in the same rank order into its own buffer:
// a replay gives the bits of the eager collective. A graph's wait holds its stream while a peer is
// late, and an allocation waits for the whole device: ranks must not allocate while a peer's graph
// may wait for them (kvactor's ranks meet on the host before every replay).
//
// Plain C++ (no CUDA headers): built from comm/device_local/ with CUDA, else every call says
// that this build has no CUDA.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kvactor/comm/communicator.h"

namespace kvactor::comm {

/// The most ranks a device-local group may have (a failure report names missing ranks in a mask;
/// eight also bounds the slots one group keeps).
inline constexpr int max_device_local_ranks = 8;

/// True when this build can create device-local groups; otherwise false with `why_not` set.
bool device_local_available(std::string* why_not);

/// Bytes each rank's slot holds per round (two per rank: rounds alternate between them).
inline constexpr size_t default_device_local_slot_bytes = size_t{8} << 20;

/// One communicator per rank of a new group of `world_size` ranks on CUDA device `device`; a
/// meeting that waits longer than `timeout` for its peers fails. Each rank must use its
/// communicator from its own thread. Throws collective_error: invalid_argument (world_size
/// outside [1, max_device_local_ranks], timeout not positive, slot_bytes not a positive multiple
/// of 256), transport (no CUDA in this build, or the device cannot be used).
std::vector<std::shared_ptr<communicator>>
make_device_local_group(int world_size, int device, std::chrono::milliseconds timeout,
                        size_t slot_bytes = default_device_local_slot_bytes);

} // namespace kvactor::comm
