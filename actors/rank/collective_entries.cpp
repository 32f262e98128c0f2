#include "actors/rank/collective_entries.hpp"

namespace kvactor {

namespace {

// The message vocabulary mirrors the kernels' enum value for value (messages do not depend on
// kernels), so the conversion is a cast, checked here.
collective_status to_message(comm::collective_status s) {
  using k = comm::collective_status;
  static_assert(static_cast<int>(k::pending) == static_cast<int>(collective_status::pending));
  static_assert(static_cast<int>(k::completed) == static_cast<int>(collective_status::completed));
  static_assert(static_cast<int>(k::timed_out) == static_cast<int>(collective_status::timed_out));
  static_assert(static_cast<int>(k::aborted) == static_cast<int>(collective_status::aborted));
  static_assert(static_cast<int>(k::failed) == static_cast<int>(collective_status::failed));
  return static_cast<collective_status>(s);
}

} // namespace

collective_entry to_entry(const comm::collective_record& r) {
  return {r.seq,
          comm::operation_name(r),
          std::string{comm::to_string(r.dtype)},
          static_cast<int64_t>(r.count),
          static_cast<int64_t>(r.bytes),
          to_message(r.status)};
}

std::vector<collective_entry> ledger_entries(const comm::collective_ledger& ledger) {
  std::vector<collective_entry> out;
  for (const auto& r : ledger.entries())
    out.push_back(to_entry(r));
  return out;
}

} // namespace kvactor
