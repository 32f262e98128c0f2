// `kvactor trace show FILE [--step N] [--json]`: a readable timeline of a recorded run.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace kvactor {

struct trace_show_flags {
  std::string file;
  std::optional<uint64_t> step; // only the messages of this step
  bool json = false;
};

int run_trace_show(const trace_show_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
