#include "messages/errc.hpp"

namespace kvactor {

std::string_view to_string(errc x) {
  switch (x) {
  case errc::no_error: return "no_error";
  case errc::invalid_argument: return "invalid_argument";
  case errc::parse_error: return "parse_error";
  case errc::unknown_model_type: return "unknown_model_type";
  case errc::missing_field: return "missing_field";
  case errc::invalid_split: return "invalid_split";
  case errc::insufficient_memory: return "insufficient_memory";
  case errc::incompatible_specs: return "incompatible_specs";
  case errc::no_common_block_size: return "no_common_block_size";
  case errc::unsupported: return "unsupported";
  case errc::io_error: return "io_error";
  case errc::step_failed: return "step_failed";
  case errc::collective_failed: return "collective_failed";
  case errc::rank_lost: return "rank_lost";
  }
  return "unknown";
}

} // namespace kvactor
