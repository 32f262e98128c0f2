// The NCCL communicator: one tensor-parallel rank per GPU (communicator.h). Buffers are device
// memory of the rank's GPU; collectives are enqueued on a CUDA stream and return once enqueued;
// synchronize() waits for them with the timeout. Plain C++ (no NCCL or CUDA headers): built from
// comm/nccl/nccl_communicator.cpp when CUDA and NCCL are found, from comm/nccl/no_nccl.cpp
// otherwise, where every call says that this build has no NCCL.
//
// Never a hang: initialization is non-blocking (ncclConfig_t::blocking = 0) and polled with
// ncclCommGetAsyncError until ready or the timeout; every collective polls the asynchronous
// error before and after it is enqueued; completion is observed through CUDA events, never by
// blocking on the stream. Any failure or timeout calls ncclCommAbort (which also ends the NCCL
// kernels still waiting on the device) and throws collective_error with the rank's ledger tail.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvactor/comm/communicator.h"

namespace kvactor::comm {

/// True when this build links NCCL; otherwise false with `why_not` set.
bool nccl_available(std::string* why_not);

/// A new unique id (the bytes of an ncclUniqueId), created once by rank 0 and handed to every
/// rank by the driver. Throws collective_error (transport) without NCCL or when NCCL fails.
std::vector<char> nccl_unique_id();

struct nccl_options {
  int device = 0; // the CUDA device of this rank (made current on the calling thread)
  std::chrono::milliseconds timeout{120'000}; // initialization, and every wait for collectives
};

/// Joins rank `rank` of `world_size` to the communicator named by `unique_id`; every rank must
/// call this concurrently (each on its own thread or process). Returns once the communicator is
/// ready. Throws collective_error: invalid_argument (id size, rank, world), timeout (peers did not
/// join within options.timeout; the half-made communicator is aborted), transport (NCCL or CUDA
/// failed, or this build has no NCCL). The returned communicator must be used from one thread.
std::shared_ptr<communicator> make_nccl_communicator(const std::vector<char>& unique_id,
                                                     int world_size, int rank,
                                                     const nccl_options& options);

} // namespace kvactor::comm
