// Names of the collective vocabulary, as ledgers and error messages print them; the defaults of
// the communicator interface.
#include "kvactor/comm/communicator.h"

#include "kvactor/comm/collective_ledger.h"

#include <sstream>

#include "timeouts.h"

namespace kvactor::comm {

std::string_view to_string(collective_kind x) {
  switch (x) {
  case collective_kind::all_reduce: return "all_reduce";
  case collective_kind::all_gather: return "all_gather";
  case collective_kind::broadcast: return "broadcast";
  case collective_kind::barrier: return "barrier";
  }
  return "unknown";
}

std::string_view to_string(reduce_op x) {
  switch (x) {
  case reduce_op::sum: return "sum";
  case reduce_op::min: return "min";
  case reduce_op::max: return "max";
  }
  return "unknown";
}

std::string_view to_string(collective_dtype x) {
  switch (x) {
  case collective_dtype::float32: return "float32";
  case collective_dtype::int64: return "int64";
  }
  return "unknown";
}

size_t size_of(collective_dtype x) {
  return x == collective_dtype::int64 ? sizeof(int64_t) : sizeof(float);
}

std::string_view to_string(collective_failure x) {
  switch (x) {
  case collective_failure::timeout: return "timeout";
  case collective_failure::aborted: return "aborted";
  case collective_failure::mismatch: return "mismatch";
  case collective_failure::invalid_argument: return "invalid_argument";
  case collective_failure::transport: return "transport";
  }
  return "unknown";
}

std::vector<int64_t> communicator::gather(const std::vector<int64_t>& values) {
  if (space() != memory_space::host)
    throw collective_error(collective_failure::invalid_argument,
                           "gather: a device communicator must implement it (its all_gather "
                           "takes device memory)");
  std::vector<int64_t> out(values.size() * static_cast<size_t>(world_size()));
  all_gather(values.data(), out.data(), values.size(), collective_dtype::int64);
  return out;
}

std::vector<collective_record> communicator::take_captured() {
  return {};
}

void communicator::replayed(const std::vector<collective_record>&, void*) {}

void communicator::before_replay(const std::vector<collective_record>&) {}

namespace detail {

std::string seconds(std::chrono::milliseconds d) {
  std::ostringstream os;
  os << static_cast<double>(d.count()) / 1000.0 << " s";
  return os.str();
}

} // namespace detail

} // namespace kvactor::comm
