#include "deploy/transport/step_channel_server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "deploy/transport/step_frame.hpp"
#include "deploy/transport/step_socket.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

struct step_channel_server::connection {
  explicit connection(int fd) : sock(fd) {}
  step_socket sock;
  std::thread thread;
  bool proven = false; // under mu_
  std::atomic<bool> finished{false};
};

expected<std::unique_ptr<step_channel_server>>
step_channel_server::listen(const std::string& host, uint16_t port, step_channel_auth auth,
                            step_channel_limits limits) {
  auto l = listen_tcp(host, port);
  if (!l) return make_error(l.err().code, "step channel: " + l.err().message);
  return std::unique_ptr<step_channel_server>(
      new step_channel_server(l->fd, l->port, std::move(auth), limits));
}

step_channel_server::step_channel_server(int listen_fd, uint16_t port, step_channel_auth auth,
                                         step_channel_limits limits)
    : listen_fd_(listen_fd), port_(port), auth_(std::move(auth)), limits_(limits) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
}

step_channel_server::~step_channel_server() {
  stopping_ = true;
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : connections_)
      c->sock.shut_down();
  }
  for (auto& c : connections_)
    if (c->thread.joinable()) c->thread.join();
  ::close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void step_channel_server::serve(caf::actor_system& sys, node_actor node) {
  sys_ = &sys;
  node_ = std::move(node);
  acceptor_ = std::thread([this] { accept_loop(); });
}

void step_channel_server::accept_loop() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, wake_[0] >= 0 ? 2 : 1, 1000) <= 0 || stopping_) continue;
    if ((p[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) admit(fd);
  }
}

size_t step_channel_server::count_proven() const {
  size_t n = 0;
  for (const auto& c : connections_)
    n += c->proven && !c->finished ? 1 : 0;
  return n;
}

void step_channel_server::evict_oldest_pending() {
  size_t pending = 0;
  connection* oldest = nullptr;
  for (const auto& c : connections_)
    if (!c->proven && !c->finished) {
      ++pending;
      if (!oldest) oldest = c.get();
    }
  if (pending < limits_.max_pending || !oldest) return;
  ++counts_.evicted;
  oldest->sock.shut_down(); // its thread's proof fails and ends
}

// A thread for the connection, unless max_connections are served already.
void step_channel_server::admit(int fd) {
  reap_finished();
  std::lock_guard<std::mutex> lock(mu_);
  if (count_proven() >= limits_.max_connections) {
    ++counts_.refused_full;
    ::close(fd);
    return;
  }
  evict_oldest_pending();
  ++counts_.accepted;
  auto& c = *connections_.emplace_back(std::make_unique<connection>(fd));
  c.thread = std::thread([this, &c] {
    serve_connection(c);
    c.sock.shut_down(); // the peer sees the close now, not when the thread is reaped
    c.finished = true;
  });
}

void step_channel_server::reap_finished() {
  std::list<std::unique_ptr<connection>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();)
      if ((*it)->finished)
        done.splice(done.end(), connections_, it++);
      else
        ++it;
  }
  for (auto& c : done)
    c->thread.join();
}

bool step_channel_server::admit_proven(connection& c) {
  if (auto proven = authenticate(c.sock, connection_side::accepted, auth_, limits_.proof_timeout);
      !proven) {
    ++counts_.refused_auth;
    log_.warn(fmt::format("a connection failed the {}: {}",
                          auth_.tls ? "TLS handshake" : "cookie proof", proven.err().message));
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (count_proven() >= limits_.max_connections) {
    ++counts_.refused_full;
    log_.always(
        fmt::format("refused a driver: {} connections are served", limits_.max_connections));
    return false;
  }
  c.proven = true;
  return true;
}

void step_channel_server::serve_connection(connection& c) {
  int one = 1;
  ::setsockopt(c.sock.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (admit_proven(c)) relay_steps(c);
}

namespace {

// The node's answer to one step frame, written back; an error for a frame that is not a step.
status relay_frame(caf::scoped_actor& self, const node_actor& node, step_socket& sock,
                   const step_frame_body& frame) {
  if (frame.kind != step_frame_kind::step)
    return make_error(errc::parse_error, fmt::format("step channel: a driver sent a frame of kind "
                                                     "{}, not a step",
                                                     static_cast<int>(frame.kind)));
  auto s = read_step(frame.body);
  if (!s) return s.err();
  std::vector<char> out;
  self->request(node, caf::infinite, std::move(s->step))
      .receive([&](node_step_done& d) { out = answer_frame(d); },
               [&](caf::error& e) { out = refusal_frame(s->seq, from_caf_error(e)); });
  return sock.write_all(out.data(), out.size());
}

} // namespace

// Steps in, answers out, one at a time: the driver has one step in flight.
void step_channel_server::relay_steps(connection& c) {
  caf::scoped_actor self{*sys_};
  step_frame_reader reader{limits_.max_frame_bytes};
  std::vector<char> buf(64 << 10);
  for (;;) {
    auto got = c.sock.read_some(buf.data(), buf.size());
    if (!got || *got == 0) return; // the driver left (or the node stops)
    auto fed = reader.feed(buf.data(), *got);
    for (auto frame = reader.next(); fed && frame; frame = reader.next()) {
      ++counts_.steps;
      fed = relay_frame(self, node_, c.sock, *frame);
    }
    if (!fed) {
      ++counts_.refused_frames;
      log_.always(fmt::format("closed a connection: {}", fed.err().message));
      return;
    }
  }
}

} // namespace kvactor
