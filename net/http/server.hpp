// An HTTP/1.1 server for the kvactor command's OpenAI-compatible endpoint: event-driven (Asio),
// a few I/O threads for thousands of open connections, no thread per connection. It knows nothing
// about what it serves: it parses each request, hands it to the handler, and writes the answer the
// handler's responder is given, from any thread, whole or streamed (chunked, e.g. server-sent
// events).
//
// Per connection: keep-alive and pipelined requests are answered in order, one at a time (the
// next request goes to the handler once the previous answer is complete); `Connection: close`
// (or HTTP/1.0 without keep-alive) closes after the answer. Every response carries
// `Server: kvactor` and either `Content-Length` or `Transfer-Encoding: chunked`.
//
// Refusals (a response, then the connection closes): malformed bytes 400, a body above
// max_body_bytes 413, a header above max_header_bytes 431, a connection beyond max_connections
// 503. A client that goes away, a write that fails, or a stream whose unsent bytes pass
// max_buffered_bytes (a reader too slow) ends the exchange: the responder reports closed() and its
// on_disconnect callback runs; later writes are dropped quietly.
//
// Usage:
//   auto srv = http::server::start({.port = 8000}, [](http::request req, auto res) {
//     res->respond(200, "text/plain", "hello");
//   });
//   if (!srv) return srv.err();  // names host:port and why
//
// This header holds no Boost: Asio and Beast stay inside net/http/*.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor::http {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct request {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // path and query as sent: "/v1/models?x=1"
  header_list headers; // in order; names lower-cased, values as sent
  std::string body;    // the whole body (a chunked body de-chunked)
  std::string remote;  // the client: "ip:port"
};

/// The value of the first header named `lower_name` (lower case), or nullopt.
std::optional<std::string_view> header(const request& req, std::string_view lower_name);

/// The answer to one request. Every call may come from any thread: it is posted onto the
/// connection's strand and never blocks the caller. Either one whole response (respond), or a
/// stream (begin_stream, write..., end_stream). A call out of that order is ignored.
class responder {
public:
  virtual ~responder() = default;

  /// The whole response: `body` with Content-Length.
  virtual void respond(int status, std::string content_type, std::string body,
                       header_list extra_headers = {}) = 0;
  /// The head of a chunked response; its body follows through write() and end_stream().
  virtual void begin_stream(int status, std::string content_type,
                            header_list extra_headers = {}) = 0;
  /// One chunk, sent as soon as the socket takes it, in order. An empty chunk is skipped.
  virtual void write(std::string chunk) = 0;
  virtual void end_stream() = 0;

  /// `f` runs once, on an I/O thread, if the client goes away (or the stream is cut for
  /// back-pressure) before the response completed; at once, on the caller's thread, if that
  /// already happened. Never runs once the response completed.
  virtual void on_disconnect(std::function<void()> f) = 0;
  /// The client is gone (or was cut): further calls are dropped.
  virtual bool closed() const = 0;
};

/// Called on an I/O thread for every request: it must not block (answer later from elsewhere).
/// An exception it throws answers 500 if nothing was answered yet.
using handler = std::function<void(request, std::shared_ptr<responder>)>;

struct server_options {
  std::string host = "127.0.0.1";              // an IP address (v4 or v6), or "localhost"
  uint16_t port = 0;                           // 0: any free port (see server::port())
  int threads = 1;                             // I/O threads
  size_t max_body_bytes = size_t{32} << 20;    // larger: 413, connection closed
  size_t max_header_bytes = size_t{64} << 10;  // request line + headers larger: 431
  size_t max_connections = 10000;              // beyond: 503 then close
  size_t max_buffered_bytes = size_t{8} << 20; // stream bytes queued behind the write in
                                               // progress beyond: the stream is cut
  std::chrono::seconds idle_timeout{120};      // a connection with no request in progress and
                                               // nothing received this long is closed
};

class server {
public:
  /// Listens on options.host:options.port and starts the I/O threads. Fails (naming host:port
  /// and why) when the address is not an IP address (errc::invalid_argument) or cannot be bound,
  /// e.g. it is in use (errc::io_error).
  static expected<std::unique_ptr<server>> start(server_options options, handler on_request);

  ~server(); // stop()
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// The port listened on (the one chosen when options.port was 0).
  uint16_t port() const;
  /// Closes the listener: new connections are refused; open ones go on. Idempotent.
  void stop_accepting();
  /// Closes every connection (their pending responders see on_disconnect), then joins the I/O
  /// threads. Idempotent. REQUIRES: not called from an I/O thread (a handler or callback).
  void stop();
  /// A graceful stop: closes the listener, lets each connection send the answer in progress
  /// (then closes it; idle ones close at once), and stop()s once none is left or at `deadline`.
  /// Returns the connections still open at the deadline (cut by stop()). REQUIRES: as stop().
  size_t finish(std::chrono::steady_clock::time_point deadline);
  /// Connections admitted and not yet closed (a 503-refused one does not count).
  size_t open_connections() const;

  struct impl;

private:
  explicit server(std::unique_ptr<impl> self);
  std::unique_ptr<impl> self_;
};

} // namespace kvactor::http
