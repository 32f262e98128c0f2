// Tensor-parallel coordination between the driver and the ranks: the id of a communicator the
// driver hands to every rank, and the entries of a rank's collective ledger it reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace kvactor {

/// Names one communicator of `world` ranks: rank 0 creates it (for NCCL, the bytes of an
/// ncclUniqueId) and the driver sends it to every rank, which joins with its own rank index.
struct communicator_id {
  std::vector<char> bytes;
  int32_t world = 0;
  uint64_t epoch = 0; // the driver's epoch: a communicator serves one life of the ranks

  bool operator==(const communicator_id&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, communicator_id& x) {
  return f(caf::meta::type_name("kvactor::communicator_id"), x.bytes, x.world, x.epoch);
}

/// Where a collective a rank entered stands (kernels' collective_status, whose values these
/// mirror: the rank converts, since messages do not depend on kernels).
enum class collective_status : uint8_t { pending, completed, timed_out, aborted, failed };

/// "pending", "completed", "timed_out", "aborted", "failed"; "unknown" outside the enum.
std::string_view to_string(collective_status x);

/// One collective a rank entered (kernels' collective_record, as text where it is a name).
struct collective_entry {
  uint64_t seq = 0;  // 1, 2, ... per rank, in the order entered
  std::string op;    // "all_reduce(sum)", "all_gather", "broadcast(root 0)", "barrier"
  std::string dtype; // "float32", "int64"
  int64_t count = 0; // elements this rank contributed
  int64_t bytes = 0; // count * element size
  collective_status status = collective_status::pending;

  bool completed() const { return status == collective_status::completed; }
  bool operator==(const collective_entry&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, collective_entry& x) {
  return f(caf::meta::type_name("kvactor::collective_entry"), x.seq, x.op, x.dtype, x.count,
           x.bytes, x.status);
}

} // namespace kvactor
