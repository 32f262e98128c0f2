#include "net/http/server.hpp"

#include <algorithm>
#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>

#include "net/http/server_state.hpp"
#include "net/http/session.hpp"

namespace kvactor::http {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

// After a failed accept (out of file descriptors, mostly) the listener waits this long: retrying
// at once would spin.
constexpr std::chrono::milliseconds accept_retry{50};

// The server whose I/O thread this is (null elsewhere): stop_accepting() must not wait on itself.
thread_local const void* running_server = nullptr;

expected<asio::ip::address> address_of(const std::string& host) {
  error_code ec;
  auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec)
    return make_error(errc::invalid_argument,
                      fmt::format("http server: host '{}' is not an IP address", host));
  return address;
}

} // namespace

std::optional<std::string_view> header(const request& req, std::string_view lower_name) {
  for (const auto& [name, value] : req.headers)
    if (name == lower_name) return std::string_view(value);
  return std::nullopt;
}

// Members are destroyed in reverse: the io_context (and with it every session) before `state`.
struct server::impl {
  impl(server_options options, handler on_request)
      : state(std::move(options), std::move(on_request)), io(std::max(1, state.options.threads)),
        accept_strand(asio::make_strand(io)), acceptor(accept_strand), retry_timer(accept_strand),
        work(asio::make_work_guard(io)) {}

  expected<ok_t> listen(const asio::ip::address& address);
  void accept_next();
  void on_accept(const error_code& ec, tcp::socket socket);
  void run_threads();
  bool on_io_thread() const;

  server_state state;
  asio::io_context io;
  asio::strand<asio::io_context::executor_type> accept_strand;
  tcp::acceptor acceptor;
  asio::steady_timer retry_timer;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  std::atomic<bool> accepting{true};
  std::atomic<bool> stopped{false};
};

expected<ok_t> server::impl::listen(const asio::ip::address& address) {
  const tcp::endpoint endpoint(address, state.options.port);
  error_code ec;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) port = acceptor.local_endpoint(ec).port();
  if (ec)
    return make_error(errc::io_error,
                      fmt::format("http server: cannot listen on {}:{}: {}", state.options.host,
                                  state.options.port, ec.message()));
  return ok();
}

void server::impl::accept_next() {
  // Each connection gets a strand of its own: its handlers never run at once.
  acceptor.async_accept(asio::make_strand(io), [this](const error_code& ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void server::impl::on_accept(const error_code& ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) {
    retry_timer.expires_after(accept_retry);
    retry_timer.async_wait([this](const error_code& e) {
      if (!e && acceptor.is_open()) accept_next();
    });
    return;
  }
  std::make_shared<session>(std::move(socket), state)->open();
  accept_next();
}

void server::impl::run_threads() {
  const int n = std::max(1, state.options.threads);
  for (int i = 0; i < n; ++i)
    threads.emplace_back([this] {
      running_server = this;
      io.run();
    });
}

bool server::impl::on_io_thread() const {
  return running_server == this;
}

expected<std::unique_ptr<server>> server::start(server_options options, handler on_request) {
  auto address = address_of(options.host);
  if (!address) return address.err();
  auto self = std::make_unique<impl>(std::move(options), std::move(on_request));
  if (auto listening = self->listen(*address); !listening) return listening.err();
  self->accept_next();
  self->run_threads();
  return std::unique_ptr<server>(new server(std::move(self)));
}

server::server(std::unique_ptr<impl> self) : self_(std::move(self)) {}

server::~server() {
  stop();
}

uint16_t server::port() const {
  return self_->port;
}

size_t server::open_connections() const {
  return self_->state.admitted();
}

void server::stop_accepting() {
  if (!self_->accepting.exchange(false)) return;
  auto closed = std::make_shared<std::promise<void>>();
  auto done = closed->get_future();
  asio::post(self_->accept_strand, [this, closed] {
    error_code ec;
    self_->acceptor.close(ec);
    self_->retry_timer.cancel();
    closed->set_value();
  });
  // On an I/O thread the close runs after the caller returns; elsewhere it is waited for, so that
  // a connection attempted after this call is refused.
  if (!self_->on_io_thread()) done.wait();
}

size_t server::finish(std::chrono::steady_clock::time_point deadline) {
  stop_accepting();
  for (auto& s : self_->state.finish_all())
    s->post_finish();
  const size_t left = self_->state.wait_all_gone(deadline) ? 0 : open_connections();
  stop();
  return left;
}

void server::stop() {
  if (self_->stopped.exchange(true)) return;
  stop_accepting();
  for (auto& s : self_->state.close_all())
    s->post_close();
  self_->work.reset(); // the threads return once the closes ran and nothing else is pending
  for (auto& t : self_->threads)
    t.join();
  self_->state.gate->close(); // responders stop posting before the io_context goes away
}

} // namespace kvactor::http
