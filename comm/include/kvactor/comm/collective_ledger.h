// A rank's collective ledger: every collective it entered, numbered from 1 in the order entered,
// with its shape and outcome. The last entries of every rank say where a stuck tensor-parallel
// group stands ("rank 1 is at all_reduce #37; ranks 0, 2, 3 wait in all_reduce #38").
// Thread-safe; keeps the most recent `capacity` entries (sequence numbers never restart).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "kvactor/comm/communicator.h"

namespace kvactor::comm {

enum class collective_status : uint8_t {
  pending,   // entered, not (yet) seen complete
  completed, // finished on this rank
  timed_out, // this rank gave up waiting after the communicator's timeout
  aborted,   // the communicator was aborted while this collective waited
  failed,    // the transport reported an error, or the ranks disagreed on the collective
};

std::string_view to_string(collective_status x);

struct collective_record {
  uint64_t seq = 0; // 1, 2, ... per rank
  collective_kind kind = collective_kind::all_reduce;
  reduce_op op = reduce_op::sum; // all_reduce only
  collective_dtype dtype = collective_dtype::float32;
  size_t count = 0; // elements this rank contributes
  size_t bytes = 0; // count * size_of(dtype)
  int root = -1;    // broadcast only
  collective_status status = collective_status::pending;

  bool operator==(const collective_record&) const = default;
};

/// "all_reduce(sum)", "all_gather", "broadcast(root 0)", "barrier".
std::string operation_name(const collective_record& r);

/// "all_reduce(sum) #38 (8192 float32, 32768 bytes, pending)"; a barrier: "barrier #4 (completed)".
std::string describe(const collective_record& r);

/// A pending record of one collective's shape (bytes from count and dtype).
collective_record make_record(collective_kind kind, reduce_op op, collective_dtype dtype,
                              size_t count, int root = -1, uint64_t seq = 0);

class collective_ledger {
public:
  static constexpr size_t default_capacity = 256;

  explicit collective_ledger(size_t capacity = default_capacity);

  /// Enters a new pending collective; returns its sequence number.
  uint64_t enter(collective_kind kind, reduce_op op, collective_dtype dtype, size_t count,
                 int root = -1);
  /// Sets the outcome of entry `seq` (ignored when it has left the window).
  void finish(uint64_t seq, collective_status status);
  /// Sets every pending entry to `status` (a timeout or an abort ends them all).
  void finish_pending(collective_status status);

  /// The retained entries, oldest first.
  std::vector<collective_record> entries() const;
  /// The last `n` entries, oldest first.
  std::vector<collective_record> last(size_t n) const;
  /// The sequence number the next collective gets.
  uint64_t next_seq() const;
  /// "last collectives of this rank: #36 all_reduce(sum) ... ; #37 ..." (the last `n`), or
  /// "no collective entered yet".
  std::string tail(size_t n = 4) const;

private:
  mutable std::mutex mu_;
  size_t capacity_;
  uint64_t next_ = 1;
  std::deque<collective_record> records_;
};

} // namespace kvactor::comm
