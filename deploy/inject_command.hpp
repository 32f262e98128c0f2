// `kvactor inject --to HOST:PORT --message FILE [--actor NAME]`: delivers one typed message to a
// running kvactor process (started with --inject-port) and prints the reply.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

struct inject_flags {
  std::string to;          // HOST:PORT
  std::string message;     // file: MessagePack envelope or JSON
  std::string actor;       // empty: the file's "receiver", else by message type
  double timeout_s = 10.0; // for everything: connecting, the reply and, with wait, the result
  bool wait = false;       // a request_spec: wait for its result (its output tokens)
  bool json = false;
  std::string max_message_bytes = "64MiB"; // the largest reply the run may send
};

/// A message read from a file: its MessagePack envelope and, for a record copied from
/// `kvactor trace show --json`, the actor it was recorded for.
struct message_file {
  std::vector<char> envelope;
  std::string receiver;
};

/// Reads FILE as MessagePack (the codec's envelope, as `kvactor trace` records payloads) or JSON:
/// `[type, schema_version, payload]`, or an object with "type", "version" (default: current),
/// "payload" and optionally "receiver" -- one record of `trace show --json`. Errors name the
/// file and the field.
expected<message_file> parse_message_file(const std::string& path, const std::string& bytes);

int run_inject(const inject_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
