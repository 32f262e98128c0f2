// The kernels of the device-local communicator. Internal to comm/device_local/ (C++17 on both
// sides of nvcc; no CUDA types in the signatures).
//
// Eager collectives: after the ranks met on the host, rank 0 launches one kernel that reads every
// rank's input and writes every rank's output (launch_collective); no kernel ever waits for a peer.
//
// Collectives inside CUDA graphs have no host in the loop: they meet on the device. They run in
// rounds; a round moves at most one slot of elements, and for each round every rank's stream runs
//   1. copy-in: its part into its slot of the round's half (halves alternate by round parity);
//   2. meet (one thread): bump its round, post what it entered and its arrival, then wait until
//      every rank has arrived at that round, or the timeout passes, or the group is aborted;
//      check that every rank entered what rank 0 entered;
//   3. finish: read every rank's slot and write its own output (all_reduce in rank order
//      (((r0 op r1) op r2) ...), the host communicator's order: every rank gets the same bits).
// A rank may copy into the other half while a slow peer still reads this one, but never two
// rounds ahead: it cannot pass round k+1's meet before every peer has finished round k.
// A failed meet is recorded (sticky: later rounds of that rank do nothing) and reported to the
// host in mapped memory; the host's abort flag ends every wait.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvactor/comm/communicator.h"
#include "kvactor/comm/device_local_communicator.h"

namespace kvactor::comm::detail {

/// Every rank's input and output buffer of one collective (device pointers), for `world` ranks.
struct rank_buffers {
  const void* in[max_device_local_ranks];
  void* out[max_device_local_ranks];
  int world;
};

/// Enqueues on `stream` (a cudaStream_t): all_reduce (out[r] = in[0] op in[1] op ... in rank
/// order, for every r), all_gather (out[r][s * count ..] = in[s]) or broadcast (out[r] =
/// in[root]). Returns the launch's cudaError_t as an int (0: success).
int launch_collective(collective_kind kind, reduce_op op, collective_dtype dtype, size_t count,
                      int root, const rank_buffers& buffers, void* stream);

/// What a rank's meet found wrong; 0 while all is well.
enum class meet_failure : int32_t { none = 0, timeout = 1, aborted = 2, mismatch = 3 };

/// A rank's failure as the host reads it (mapped host memory, written once by the device).
struct meet_report {
  int32_t failure;       // meet_failure; written last
  int32_t peer;          // mismatch: the first rank whose collective differs from rank 0's
  uint64_t round;        // the round that failed
  uint64_t missing;      // timeout: bit r set when rank r had not arrived
  uint64_t theirs, ours; // mismatch: that rank's and rank 0's signatures
};

/// Where one group meets: device memory unless said, shared by its ranks.
struct group_sync {
  unsigned long long* arrived;   // [max ranks] the last round each rank arrived at
  unsigned long long* entered;   // [2][max ranks] each rank's signature, by round parity
  unsigned long long* round;     // [max ranks] each rank's round (touched by its kernels only)
  int32_t* failed;               // [max ranks] sticky meet_failure of each rank
  const volatile int32_t* abort; // mapped host: nonzero ends every wait
  meet_report* reports;          // mapped host [max ranks]
  void* slots;                   // [2][world][slot_bytes]
  size_t slot_bytes;
  int32_t world;
};

/// The collective as one 64-bit word, equal on every rank that entered the same collective.
uint64_t collective_signature(collective_kind kind, reduce_op op, collective_dtype dtype,
                              size_t count, int root);
/// The fields collective_signature packed.
void unpack_signature(uint64_t sig, collective_kind& kind, reduce_op& op, collective_dtype& dtype,
                      size_t& count, int& root);

/// The rounds a collective of `count` elements of `dtype` takes with `slot_bytes` slots (>= 1).
uint64_t rounds_of(size_t count, collective_dtype dtype, size_t slot_bytes);

/// Enqueues rank `rank`'s part of one collective on `stream` (a cudaStream_t): all_reduce (out =
/// in[0] op ... op in[world-1], in place allowed), all_gather (out[s * count ..] = rank s's in) or
/// broadcast (out = root's in); rounds_of(count) rounds, each waiting at most `timeout_ns`.
/// Returns the launches' cudaError_t as an int (0: success).
int enqueue_collective(const group_sync& g, int rank, collective_kind kind, reduce_op op,
                       collective_dtype dtype, size_t count, int root, const void* in, void* out,
                       int64_t timeout_ns, void* stream);

} // namespace kvactor::comm::detail
