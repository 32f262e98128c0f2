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

struct trace_record;

/// One readable line about a record's message (decoded when its type is known).
std::string describe_record(const trace_record& r);
/// The step (seq) a record's message belongs to, when it belongs to one.
std::optional<uint64_t> record_step(const trace_record& r);

int run_trace_show(const trace_show_flags& flags, std::ostream& out, std::ostream& err);

/// `kvactor trace export FILE --format chrome [--out OUT]`.
struct trace_export_flags {
  std::string file;
  std::string format = "chrome";
  std::string out; // empty: standard output
};

int run_trace_export(const trace_export_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
