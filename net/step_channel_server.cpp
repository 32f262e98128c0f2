#include "net/step_channel_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/step_timeline.hpp"
#include "net/step_frame.hpp"
#include "net/step_socket.hpp"

namespace kvactor {

struct step_channel_server::connection {
  explicit connection(int fd) : sock(std::make_shared<step_socket>(fd)) {}
  std::shared_ptr<step_socket> sock; // shared with the connection's answer sink
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
      c->sock->shut_down();
  }
  for (auto& c : connections_)
    if (c->thread.joinable()) c->thread.join();
  ::close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void step_channel_server::serve(node_actor node) {
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
  oldest->sock->shut_down(); // its thread's proof fails and ends
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
    c.sock->shut_down(); // the peer sees the close now, not when the thread is reaped
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
  if (auto proven = authenticate(*c.sock, connection_side::accepted, auth_, limits_.proof_timeout);
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
  if (admit_proven(c)) relay_steps(c);
}

namespace {

// The node actor's answers, written to the connection from the node actor's thread.
class socket_sink final : public step_answer_sink {
public:
  explicit socket_sink(std::shared_ptr<step_socket> sock) : sock_(std::move(sock)) {}
  void answer(const node_step_done& done) override {
    write(answer_frame(done));
    step_timeline::mark(done.seq, -1, step_point::node_written);
  }
  void refuse(uint64_t seq, const error& why) override { write(refusal_frame(seq, why)); }

private:
  void write(const std::vector<char>& frame) {
    // A driver that is gone: the connection's thread sees the close and ends.
    if (!sock_->write_all(frame.data(), frame.size())) sock_->shut_down();
  }
  std::shared_ptr<step_socket> sock_;
};

// One step frame to the node actor, which answers through the sink `channel`.
status relay_frame(const node_actor& node, uint64_t channel, const step_frame_body& frame) {
  if (frame.kind != step_frame_kind::step)
    return make_error(errc::parse_error,
                      fmt::format("step channel: a driver sent a frame of kind {}, not a step",
                                  static_cast<int>(frame.kind)));
  auto s = read_step(frame.body);
  if (!s) return s.err();
  step_timeline::mark(s->seq, -1, step_point::node_read);
  caf::anon_send(node, atom::relay_v, channel, s->seq, std::move(s->step));
  return ok();
}

} // namespace

// Steps in; the node actor writes the answers.
void step_channel_server::relay_steps(connection& c) {
  const auto channel = sinks_->add(std::make_shared<socket_sink>(c.sock));
  step_frame_reader reader{limits_.max_frame_bytes};
  std::vector<char> buf(64 << 10);
  status fed = ok();
  pollfd readable{c.sock->fd(), POLLIN, 0};
  while (fed) {
    if (!c.sock->has_buffered()) (void)spin_until_readable(&readable, 1, limits_.spin);
    auto got = c.sock->read_some(buf.data(), buf.size());
    if (!got || *got == 0) break; // the driver left (or the node stops)
    fed = reader.feed(buf.data(), *got);
    for (auto frame = reader.next(); fed && frame; frame = reader.next()) {
      ++counts_.steps;
      fed = relay_frame(node_, channel, *frame);
    }
  }
  sinks_->remove(channel);
  if (!fed) {
    ++counts_.refused_frames;
    log_.always(fmt::format("closed a connection: {}", fed.err().message));
  }
}

} // namespace kvactor
