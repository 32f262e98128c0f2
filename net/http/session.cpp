#include "net/http/session.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "net/http/wire.hpp"

namespace kvactor::http {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// Unparsed bytes (pipelined requests) kept while a request is answered; past it reading pauses.
constexpr size_t min_input_cap = size_t{64} << 10;
// Bytes read per wake-up: taken on the stack, so an idle connection holds no read buffer.
constexpr size_t read_size = size_t{16} << 10;
// Buffers handed to one gathered write.
constexpr size_t max_gather = 64;
// How long a closing connection waits for the client to close its side.
constexpr std::chrono::seconds max_linger{2};

std::string remote_of(const asio::ip::tcp::socket& socket) {
  error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  const auto ip = ep.address().to_string();
  const auto port = std::to_string(ep.port());
  return ep.address().is_v6() ? "[" + ip + "]:" + port : ip + ":" + port;
}

// A callback of the handler's side: its exception must not unwind an I/O thread.
void run_quietly(const std::function<void()>& f) {
  try {
    f();
  } catch (...) {
  }
}

} // namespace

session::session(tcp::socket socket, server_state& server)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), server_(server) {}

session::~session() {
  server_.delist(this);
}

void session::open() {
  asio::post(socket_.get_executor(),
             [self = shared_from_this()] { self->start(self->server_.enlist(self)); });
}

void session::post_close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close_now(); });
}

void session::post_finish() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->closed_ || self->current_) return; // complete_exchange() closes it
    self->closing_ = true;
    self->flush();
  });
}

void session::post_piece(std::shared_ptr<responder_impl> from, piece p) {
  asio::post(socket_.get_executor(),
             [self = shared_from_this(), from = std::move(from), p = std::move(p)]() mutable {
               self->accept_piece(from, std::move(p));
             });
}

void session::post_watch(std::shared_ptr<responder_impl> from, std::function<void()> f) {
  asio::post(socket_.get_executor(),
             [self = shared_from_this(), from = std::move(from), f = std::move(f)]() mutable {
               self->watch(from, std::move(f));
             });
}

void session::start(admission a) {
  if (a == admission::stopping) return close_now();
  admitted_ = a == admission::admitted;
  remote_ = remote_of(socket_);
  error_code ec;
  socket_.non_blocking(true, ec);              // reads are tried at once after each readiness wait
  socket_.set_option(tcp::no_delay(true), ec); // stream chunks leave at once
  last_activity_ = clock::now();
  arm_timer();
  if (a == admission::full) return refuse(503);
  want_read();
}

// ---- idle and linger deadlines --------------------------------------------------------------

void session::arm_timer() {
  const auto deadline = lingering_ ? linger_until_ : last_activity_ + server_.options.idle_timeout;
  timer_.expires_at(deadline);
  timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec != asio::error::operation_aborted) self->on_timer();
  });
}

void session::on_timer() {
  if (closed_) return;
  const auto now = clock::now();
  if (lingering_) {
    if (now >= linger_until_) return close_now();
  } else if (now >= last_activity_ + server_.options.idle_timeout) {
    if (!current_) return close_now();
    last_activity_ = now; // a request in progress (a handler thinking, a quiet stream) is not idle
  }
  arm_timer();
}

// ---- reading ------------------------------------------------------------------------------

bool session::wants_bytes() const {
  if (closed_ || reading_) return false;
  if (lingering_) return true;
  if (closing_) return false;
  return !current_ || input_.size() < std::max(min_input_cap, server_.options.max_header_bytes);
}

void session::want_read() {
  if (!wants_bytes()) return;
  reading_ = true;
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
    self->reading_ = false;
    if (self->closed_) return;
    if (ec) return self->close_now();
    self->on_readable();
  });
}

void session::on_readable() {
  std::array<char, read_size> bytes;
  error_code ec;
  const size_t n = socket_.read_some(asio::buffer(bytes), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return want_read();
  if (ec) return close_now(); // EOF included: the client went away
  last_activity_ = clock::now();
  if (!lingering_) {
    input_.append(bytes.data(), n);
    process_input();
  }
  want_read();
}

void session::process_input() {
  const parse_limits limits{server_.options.max_body_bytes, server_.options.max_header_bytes};
  while (!closed_ && !closing_ && !current_ && !input_.empty()) {
    if (!parser_) parser_ = std::make_unique<request_parser>(limits);
    input_.erase(0, parser_->feed(input_));
    if (parser_->take_continue()) queue(std::string(continue_line));
    if (const int status = parser_->refused()) return refuse(status);
    if (!parser_->done()) break;
    dispatch();
  }
  flush();
}

void session::dispatch() {
  const bool close_after = !parser_->keep_alive() || server_.finishing();
  request req = parser_->take();
  parser_.reset();
  req.remote = remote_;
  current_ = std::make_shared<responder_impl>(weak_from_this(), server_.gate, close_after);
  auto answer = current_;
  try {
    server_.on_request(std::move(req), answer);
  } catch (...) {
    answer->respond(500, "text/plain", std::string(reason_phrase(500)) + "\n", {});
  }
}

void session::refuse(int status) {
  parser_.reset();
  input_.clear();
  queue(refusal(status));
  closing_ = true;
  flush();
}

// ---- answers ------------------------------------------------------------------------------

void session::accept_piece(const std::shared_ptr<responder_impl>& from, piece p) {
  if (closed_ || from != current_) return; // an answer to a connection or exchange gone by
  using phase = responder_impl::phase;
  const phase expected = p.kind == piece_kind::whole || p.kind == piece_kind::stream_head
                             ? phase::awaiting
                             : phase::streaming;
  if (from->state != expected) return; // out of order: ignored, as the API says
  queue(std::move(p.head));
  if (!p.body.empty()) queue(std::move(p.body));
  if (p.kind == piece_kind::stream_head) from->state = phase::streaming;
  // Bytes waiting behind the write in progress: they pile up only when the reader is slower.
  if (p.kind == piece_kind::chunk
      && output_bytes_ - in_flight_bytes_ > server_.options.max_buffered_bytes)
    return close_now(); // cut the stream
  if (p.kind == piece_kind::whole || p.kind == piece_kind::stream_end) complete_exchange();
  flush();
}

void session::complete_exchange() {
  current_->state = responder_impl::phase::complete;
  current_->on_gone.clear(); // they never run now; one may hold the responder itself
  closing_ = current_->close_after() || server_.finishing();
  current_.reset();
  last_activity_ = clock::now();
  process_input(); // a pipelined request may be waiting
  want_read();
}

void session::watch(const std::shared_ptr<responder_impl>& from, std::function<void()> f) {
  if (!closed_ && from == current_) {
    from->on_gone.push_back(std::move(f));
  } else if (from->closed()) {
    run_quietly(f);
  } // else: the answer completed; the callback never runs
}

// ---- writing ------------------------------------------------------------------------------

void session::queue(std::string bytes) {
  output_bytes_ += bytes.size();
  output_.push_back(std::move(bytes));
}

void session::flush() {
  if (closed_ || in_flight_ > 0) return;
  if (output_.empty()) {
    if (closing_) linger();
    return;
  }
  std::vector<asio::const_buffer> buffers;
  for (size_t i = 0; i < output_.size() && i < max_gather; ++i)
    buffers.push_back(asio::buffer(output_[i]));
  in_flight_ = buffers.size();
  in_flight_bytes_ = asio::buffer_size(buffers);
  // NOTE: deque::push_back never moves elements, so the strings in flight stay put.
  asio::async_write(socket_, buffers, [self = shared_from_this()](const error_code& ec, size_t) {
    self->on_written(ec);
  });
}

void session::on_written(const error_code& ec) {
  if (closed_) return;
  if (ec) return close_now(); // the client went away
  for (; in_flight_ > 0; --in_flight_) {
    output_bytes_ -= output_.front().size();
    output_.pop_front();
  }
  in_flight_bytes_ = 0;
  last_activity_ = clock::now();
  flush();
}

// ---- closing ------------------------------------------------------------------------------

void session::linger() {
  if (lingering_) return;
  lingering_ = true;
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  linger_until_ =
      clock::now() + std::min<clock::duration>(max_linger, server_.options.idle_timeout);
  timer_.cancel(); // re-armed for the linger deadline
  arm_timer();
  want_read();
}

void session::close_now() {
  if (closed_) return;
  closed_ = true;
  if (admitted_) server_.release();
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  timer_.cancel();
  parser_.reset();
  input_.clear();
  fire_disconnect();
}

void session::fire_disconnect() {
  if (!current_) return;
  auto callbacks = std::move(current_->on_gone);
  current_->mark_closed();
  current_.reset(); // a responder the handler let go is freed before its callbacks run
  for (const auto& f : callbacks)
    run_quietly(f);
}

} // namespace kvactor::http
