#include "actors/rank/collective_entries.hpp"

namespace kvactor {

collective_entry to_entry(const kernels::collective_record& r) {
  return {r.seq,
          kernels::operation_name(r),
          std::string{kernels::to_string(r.dtype)},
          static_cast<int64_t>(r.count),
          static_cast<int64_t>(r.bytes),
          std::string{kernels::to_string(r.status)}};
}

std::vector<collective_entry> ledger_entries(const kernels::collective_ledger& ledger) {
  std::vector<collective_entry> out;
  for (const auto& r : ledger.entries())
    out.push_back(to_entry(r));
  return out;
}

} // namespace kvactor
