// The trace file of recorded actor messages (kvactor run --record, replay, trace show):
//
//   header  "KVTRACE\0" | u32 trace schema version (little endian)
//   record  u32 length (little endian) | MessagePack [index, timestamp_ns, sender, receiver,
//           type, payload]   where payload is the message's own codec envelope (messages/codec.hpp)
//
// Length prefixes let a reader skip records it does not understand and tell a truncated file
// from a corrupt one. Reading never throws: every problem is an error naming the record.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "messages/codec.hpp"
#include "messages/errc.hpp"

namespace kvactor {

inline constexpr uint32_t trace_schema_version = 1;
/// Records larger than this are corrupt (a step plan of 2048 tokens is a few KiB).
inline constexpr uint32_t max_trace_record_bytes = 64u << 20;

struct trace_record {
  uint64_t index = 0;       // position in the trace, from 0
  int64_t timestamp_ns = 0; // monotonic, from the start of the run
  std::string sender;       // e.g. "driver", "rank[0]", "builder[1]@rank[0]"
  std::string receiver;
  std::string type;          // the codec name, e.g. "kvactor::step_plan"
  std::vector<char> payload; // encode(message)

  bool operator==(const trace_record&) const = default;
};

class trace_writer {
public:
  /// Writes the header.
  explicit trace_writer(std::ostream& out);

  /// Appends one record (its index is the writer's count).
  status write(int64_t timestamp_ns, std::string sender, std::string receiver, std::string type,
               std::vector<char> payload);

  template <class T>
  status write_message(int64_t timestamp_ns, std::string sender, std::string receiver,
                       const T& message) {
    return write(timestamp_ns, std::move(sender), std::move(receiver),
                 std::string{detail::type_name_of(message)}, encode(message));
  }

  uint64_t count() const { return count_; }

private:
  std::ostream& out_;
  uint64_t count_ = 0;
};

class trace_reader {
public:
  /// Reads and checks the header; a bad header makes every next() fail with its reason.
  explicit trace_reader(std::istream& in);

  /// The next record, nothing at a clean end of file, or an error naming the record.
  expected<std::optional<trace_record>> next();

  /// Every record; the first error stops the read.
  expected<std::vector<trace_record>> read_all();

private:
  std::istream& in_;
  uint64_t next_index_ = 0;
  std::optional<error> failure_;
};

/// Decodes a record's payload as T, naming the record on failure.
template <class T>
expected<T> decode_record(const trace_record& r) {
  auto x = decode<T>(r.payload);
  if (!x)
    return make_error(errc::parse_error, "record " + std::to_string(r.index) + " (" + r.type
                                             + "): " + x.err().message);
  return x;
}

} // namespace kvactor
