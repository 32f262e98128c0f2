// One client connection: reads requests, hands them to the handler one at a time, and writes the
// answers its responders post, in order. Everything below runs on the connection's strand.
//
//   open ─enlist─> admitted ──> serving ⟲ (next request once the answer is complete)
//            │                    │  Connection: close, or a refusal (400 413 431)
//            ├─ full ──> 503 ───> closing: send what is queued
//            │                    │  all sent
//            │                    v
//            │                 lingering: our side shut, reading until the client closes (2 s)
//            │                    │
//            └─ stopping ─────────┴──> closed  <── EOF, read/write error, idle_timeout,
//                                                  back-pressure cut, stop()
//
// finish() (a graceful stop) turns serving into closing once the answer in progress is sent.
//
// Lingering lets a refusal reach the client before the connection is reset. A connection is
// idle when no request is in progress and nothing was received or sent for idle_timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "net/http/request_parser.hpp"
#include "net/http/responder.hpp"
#include "net/http/server_state.hpp"

namespace kvactor::http {

class session final : public exchange_sink, public std::enable_shared_from_this<session> {
public:
  using tcp = boost::asio::ip::tcp;
  using clock = std::chrono::steady_clock;

  /// REQUIRES: `socket`'s executor is a strand of its own; `server` outlives the session.
  session(tcp::socket socket, server_state& server);
  ~session() override;

  /// Enlists with the server and serves (or refuses) the connection. Returns at once.
  void open();
  /// Closes the connection (its exchange in progress sees on_disconnect). Returns at once.
  void post_close();
  /// The server is finishing: an idle connection closes now, a busy one once its answer is sent.
  void post_finish();

  void post_piece(std::shared_ptr<responder_impl> from, piece p) override;
  void post_watch(std::shared_ptr<responder_impl> from, std::function<void()> f) override;

private:
  void start(admission a);
  void arm_timer();
  void on_timer();
  void want_read();
  void on_readable();
  void process_input();
  void dispatch();
  void refuse(int status);
  void accept_piece(const std::shared_ptr<responder_impl>& from, piece p);
  void complete_exchange();
  void watch(const std::shared_ptr<responder_impl>& from, std::function<void()> f);
  void queue(std::string bytes);
  void flush();
  void on_written(const boost::system::error_code& ec);
  void linger();
  void close_now();
  void fire_disconnect();
  bool wants_bytes() const;

  tcp::socket socket_;
  boost::asio::steady_timer timer_;
  server_state& server_;
  std::string remote_;

  std::string input_;                       // received, not parsed yet
  std::unique_ptr<request_parser> parser_;  // the request being received
  std::shared_ptr<responder_impl> current_; // the request being answered

  std::deque<std::string> output_; // to send, in order; the first `in_flight_` are being written
  size_t output_bytes_ = 0;
  size_t in_flight_ = 0;
  size_t in_flight_bytes_ = 0;

  clock::time_point last_activity_;
  clock::time_point linger_until_;
  bool admitted_ = false;
  bool reading_ = false;   // a wait for readable bytes is pending
  bool closing_ = false;   // close once the output is sent
  bool lingering_ = false; // our side shut; reading until the client closes
  bool closed_ = false;
};

} // namespace kvactor::http
