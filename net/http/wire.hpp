// The bytes of HTTP/1.1 responses: heads, chunks and the server's own refusals. Pure functions,
// no I/O.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "net/http/server.hpp"

namespace kvactor::http {

/// The reason phrase of a status code ("Not Found"); "Unknown" for codes it does not list.
std::string_view reason_phrase(int status);

/// A response head ending in the blank line. With `content_length` the body follows whole;
/// without, it is chunked (Transfer-Encoding: chunked). `close` adds "Connection: close".
/// An extra header whose name or value holds CR or LF is dropped (it would split the head), as is
/// one that would repeat a framing header (Content-Length, Transfer-Encoding, Connection, Server).
std::string response_head(int status, std::string_view content_type,
                          const header_list& extra_headers, std::optional<size_t> content_length,
                          bool close);

/// One chunk of a chunked body: hex size, CRLF, the bytes, CRLF. REQUIRES: !data.empty().
std::string chunk_of(std::string_view data);

/// The terminating zero-size chunk of a chunked body.
inline constexpr std::string_view last_chunk = "0\r\n\r\n";

/// "HTTP/1.1 100 Continue", for a request that sent "Expect: 100-continue".
inline constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";

/// The server's own whole answer when it refuses a request (400, 413, 431, 503, 500): a JSON
/// error object naming the status ({"error": {"message", "type", "param", "code"}}), and
/// "Connection: close".
std::string refusal(int status);

} // namespace kvactor::http
