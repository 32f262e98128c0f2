#include "net/step_channel_client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/step_timeline.hpp"
#include "net/step_frame.hpp"
#include "net/tcp_probe.hpp"

namespace kvactor {

struct step_channel_client::route_socket {
  route_socket(int32_t i, std::unique_ptr<step_socket> s, uint64_t max_frame_bytes)
      : index(i), sock(std::move(s)), reader(max_frame_bytes) {}
  int32_t index;
  std::unique_ptr<step_socket> sock;
  step_frame_reader reader;
  std::atomic<bool> open{true};
};

namespace {

// A route's connection, proven; the error says why it has none.
expected<std::unique_ptr<step_socket>> connect_route(const step_channel_endpoint& at,
                                                     const step_channel_auth& auth,
                                                     std::chrono::milliseconds timeout) {
  auto fd = tcp_connect(at.host, at.port, timeout);
  if (!fd) return fd.err();
  auto sock = std::make_unique<step_socket>(*fd);
  if (auto proven = authenticate(*sock, connection_side::connected, auth, timeout); !proven)
    return make_error(proven.err().code,
                      fmt::format("{}:{}: {}", at.host, at.port, proven.err().message));
  return sock;
}

} // namespace

std::shared_ptr<step_channel_client>
step_channel_client::connect(const std::vector<step_channel_endpoint>& routes,
                             const step_channel_auth& auth, uint64_t max_frame_bytes,
                             std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<route_socket>> sockets(routes.size());
  std::vector<std::string> why(routes.size());
  for (size_t i = 0; i < routes.size(); ++i) {
    if (routes[i].port == 0) continue;
    auto sock = connect_route(routes[i], auth, timeout);
    if (sock) {
      step_timeline::note(fmt::format("route {} port {}", i, routes[i].port));
      sockets[i] = std::make_unique<route_socket>(static_cast<int32_t>(i), std::move(*sock),
                                                  max_frame_bytes);
      continue;
    }
    why[i] = sock.err().message;
    spdlog::warn("driver: step channel of route {}: {}; its steps go through the middleman", i,
                 why[i]);
  }
  return std::shared_ptr<step_channel_client>(
      new step_channel_client(std::move(sockets), std::move(why), max_frame_bytes));
}

step_channel_client::step_channel_client(std::vector<std::unique_ptr<route_socket>> routes,
                                         std::vector<std::string> why_closed,
                                         uint64_t max_frame_bytes)
    : routes_(std::move(routes)), why_closed_(std::move(why_closed)),
      max_frame_bytes_(max_frame_bytes) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
}

std::string step_channel_client::why(size_t route) const {
  return route < why_closed_.size() ? why_closed_[route] : std::string{};
}

step_channel_client::~step_channel_client() {
  stopping_ = true;
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  for (auto& r : routes_) // a reader waiting for the rest of a TLS record wakes too
    if (r) r->sock->shut_down();
  if (reader_.joinable()) reader_.join();
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void step_channel_client::start(sink to_driver, std::chrono::microseconds spin) {
  to_driver_ = std::move(to_driver);
  spin_ = spin;
  reader_ = std::thread([this] { read_loop(); });
}

bool step_channel_client::open(size_t route) const {
  return route < routes_.size() && routes_[route] && routes_[route]->open;
}

status step_channel_client::send(size_t route, uint64_t seq, const node_step& step) {
  if (!open(route))
    return make_error(errc::io_error, fmt::format("route {} has no open step channel", route));
  step_timeline::mark(seq, static_cast<int32_t>(route), step_point::driver_send);
  const auto frame = step_frame(seq, step);
  auto sent = routes_[route]->sock->write_all(frame.data(), frame.size());
  step_timeline::mark(seq, static_cast<int32_t>(route), step_point::driver_written);
  // The reader sees the same connection close and reports it lost.
  if (!sent) routes_[route]->sock->shut_down();
  return sent;
}

void step_channel_client::read_loop() {
  std::vector<char> buf(64 << 10);
  std::vector<pollfd> fds;
  std::vector<route_socket*> polled;
  while (!stopping_) {
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    polled.clear();
    for (auto& r : routes_)
      if (r && r->open) {
        fds.push_back({r->sock->fd(), POLLIN, 0});
        polled.push_back(r.get());
      }
    if (!spin_until_readable(fds.data(), fds.size(), spin_)
        && (::poll(fds.data(), fds.size(), -1) <= 0 || stopping_))
      continue;
    for (size_t i = 0; i < polled.size(); ++i)
      if (fds[i + 1].revents != 0) read_route(*polled[i], buf);
  }
}

namespace {

// The event a node's frame reports to the driver; an error for a frame a node never sends.
expected<node_channel_event> event_of(int32_t route, const step_frame_body& frame) {
  node_channel_event e;
  e.route = route;
  if (frame.kind == step_frame_kind::answer) {
    auto done = read_answer(frame.body);
    if (!done) return done.err();
    e.seq = done->seq;
    e.answer = std::move(*done);
    return e;
  }
  if (frame.kind != step_frame_kind::refusal)
    return make_error(errc::parse_error, "step channel: a node sent a step frame");
  auto refused = read_refusal(frame.body);
  if (!refused) return refused.err();
  e.kind = channel_event_kind::refusal;
  e.seq = refused->seq;
  e.why = std::move(refused->why);
  return e;
}

} // namespace

bool step_channel_client::read_route(route_socket& r, std::vector<char>& buf) {
  do { // TLS may hold decrypted bytes that no poll would report
    auto got = r.sock->read_some(buf.data(), buf.size());
    if (!got) return lose(r, got.err());
    if (*got == 0) return lose(r, make_error(errc::io_error, "the node closed it"));
    if (auto fed = r.reader.feed(buf.data(), *got); !fed) return lose(r, fed.err());
    while (auto frame = r.reader.next()) {
      auto e = event_of(r.index, *frame);
      if (!e) return lose(r, e.err());
      step_timeline::mark(e->seq, r.index, step_point::driver_read);
      to_driver_(std::move(*e));
    }
  } while (r.sock->has_buffered());
  return true;
}

bool step_channel_client::lose(route_socket& r, const error& why) {
  r.open = false;
  r.sock->shut_down();
  node_channel_event e;
  e.route = r.index;
  e.kind = channel_event_kind::lost;
  e.why = why;
  if (to_driver_) to_driver_(std::move(e));
  return false;
}

} // namespace kvactor
