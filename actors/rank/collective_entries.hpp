// A rank's collective ledger (kernels/) as the collective_entry messages the driver gathers.
#pragma once

#include <vector>

#include "kvactor/comm/collective_ledger.h"
#include "messages/collective.hpp"

namespace kvactor {

collective_entry to_entry(const comm::collective_record& r);

/// Every entry the ledger retains, oldest first.
std::vector<collective_entry> ledger_entries(const comm::collective_ledger& ledger);

} // namespace kvactor
