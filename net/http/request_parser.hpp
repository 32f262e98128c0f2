// Reads requests from the bytes of one connection as they arrive, within the server's limits.
// The server's sessions and the fuzz target (tests/fuzz/http_request_fuzz.cpp) both parse through
// it. Beast's parser stays inside request_parser.cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "net/http/server.hpp"

namespace kvactor::http {

struct parse_limits {
  size_t max_body_bytes = size_t{32} << 20;
  size_t max_header_bytes = size_t{64} << 10; // the request line and the headers
};

/// One request at a time: make a new parser for the next request on the connection.
class request_parser {
public:
  explicit request_parser(parse_limits limits);
  ~request_parser();
  request_parser(const request_parser&) = delete;
  request_parser& operator=(const request_parser&) = delete;

  /// Parses a prefix of `bytes` and returns its length; the caller keeps the rest and feeds it
  /// again, followed by the bytes that arrive next (an unfinished line is left unconsumed). After
  /// it exactly one holds: done(), refused() != 0, or more bytes are needed. The bytes after a
  /// finished request belong to the next one and are left unconsumed.
  size_t feed(std::string_view bytes);

  bool done() const;
  /// 0 while the request is acceptable so far; else the status refusing it: 400 malformed
  /// (request line, headers, chunk encoding, a chunk's size line above max_header_bytes), 413
  /// body above max_body_bytes (said by Content-Length or reached while chunked), 431 request line
  /// and headers above max_header_bytes. A refused parser consumes nothing more.
  int refused() const;
  /// True once when the client sent "Expect: 100-continue" and its body is still to come.
  bool take_continue();
  /// Whether the connection stays open after the answer (HTTP/1.1 unless "Connection: close";
  /// HTTP/1.0 only with "Connection: keep-alive"). REQUIRES: done().
  bool keep_alive() const;
  /// The request, without `remote`. REQUIRES: done(); once.
  request take();

private:
  struct state;
  std::unique_ptr<state> self_;
};

} // namespace kvactor::http
