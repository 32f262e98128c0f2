#include "actors/rank/collective_entries.hpp"

namespace kvactor {

namespace {

// The message vocabulary mirrors the kernels' enum (messages do not depend on kernels).
collective_status to_message(kernels::collective_status s) {
  switch (s) {
  case kernels::collective_status::pending: return collective_status::pending;
  case kernels::collective_status::completed: return collective_status::completed;
  case kernels::collective_status::timed_out: return collective_status::timed_out;
  case kernels::collective_status::aborted: return collective_status::aborted;
  case kernels::collective_status::failed: return collective_status::failed;
  }
  return collective_status::failed;
}

} // namespace

collective_entry to_entry(const kernels::collective_record& r) {
  return {r.seq,
          kernels::operation_name(r),
          std::string{kernels::to_string(r.dtype)},
          static_cast<int64_t>(r.count),
          static_cast<int64_t>(r.bytes),
          to_message(r.status)};
}

std::vector<collective_entry> ledger_entries(const kernels::collective_ledger& ledger) {
  std::vector<collective_entry> out;
  for (const auto& r : ledger.entries())
    out.push_back(to_entry(r));
  return out;
}

} // namespace kvactor
