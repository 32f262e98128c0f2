// The guarded transport, in-process: a listener behind it refuses peers without the cluster cookie
// before any BASP byte, survives every crafted frame that crashes CAF 0.17 unguarded (sent by a
// peer that does hold the cookie), oversized frames, half-open connections and floods, and still
// serves a legitimate peer; a guarded client survives a hostile server. Raw sockets play the
// attacker.
#include "actors/spawn_plain.hpp"
#include "net/guarded_transport.hpp"
#include "net/peer_auth.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

namespace kvactor {
namespace {

using namespace std::chrono_literals;

transport_limits test_limits() {
  transport_limits l;
  l.frames.max_message_bytes = 64 << 10;
  l.connections.handshake_timeout = 300ms;
  l.connections.max_pending = 8;
  return l;
}

const std::string test_cookie = "kvactor-test-cookie-0123456789abcdef";

caf::behavior echo_plus_one(caf::event_based_actor*) {
  return {[](int32_t x) { return x + 1; },
          [](const std::string& s) { return static_cast<int32_t>(s.size()); }};
}

// One actor system: the listener's or the client's.
struct endpoint {
  struct config : caf::actor_system_config {
    config() { load<caf::io::middleman>(); }
  };
  explicit endpoint(std::string cookie = test_cookie)
      : net(sys, test_limits(), transport_auth{false, std::move(cookie)}) {}
  config cfg;
  caf::actor_system sys{cfg};
  guarded_transport net;
};

struct raw_socket {
  explicit raw_socket(uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    connected = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~raw_socket() { ::close(fd); }
  void send(const std::vector<std::byte>& b) const {
    ASSERT_EQ(::send(fd, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  }
  // The connecting side of peer_auth, so that what follows reaches the frame guard.
  void authenticate(const std::string& cookie = test_cookie) const {
    peer_auth auth(connection_side::connected, cookie, peer_auth::random_nonce());
    while (!auth.done()) {
      std::vector<std::byte> in(auth.wanted());
      ASSERT_EQ(::recv(fd, in.data(), in.size(), MSG_WAITALL), static_cast<ssize_t>(in.size()));
      ASSERT_TRUE(auth.feed(in.data(), in.size()));
      send(auth.take_output());
    }
  }
  // Reads (and drops) what the listener sends until it closes the connection or `wait` passes.
  bool closed_within(std::chrono::milliseconds wait) const {
    const auto until = std::chrono::steady_clock::now() + wait;
    char buf[4096];
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) != 1) continue;
      if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
    }
    return false;
  }
  int fd = -1;
  bool connected = false;
};

std::vector<std::byte> frame(const basp_header& h, size_t payload = 0) {
  const auto head = encode_basp_header(h);
  std::vector<std::byte> out(head.size() + payload);
  std::copy(head.begin(), head.end(), out.begin());
  return out;
}

int64_t resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kib = 0;
  while (status >> key)
    if (key == "VmRSS:") {
      status >> kib;
      break;
    }
  return kib;
}

class GuardedTransport : public ::testing::Test {
protected:
  void SetUp() override {
    server.emplace();
    actor = server->sys.spawn(plain<&echo_plus_one>, nullptr);
    auto bound = server->net.publish(actor, 0, "127.0.0.1");
    ASSERT_TRUE(bound) << bound.err().message;
    port = *bound;
  }
  void TearDown() override { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); }

  // A fresh client system connects, asks, and gets x + 1.
  void expect_served(int32_t x = 41) {
    endpoint client;
    auto remote = client.net.remote_actor<caf::actor>("127.0.0.1", port);
    ASSERT_TRUE(remote) << remote.err().message;
    caf::scoped_actor self{client.sys};
    std::optional<int32_t> got;
    self->request(*remote, 10s, x)
        .receive([&](int32_t y) { got = y; }, [&](caf::error& e) { FAIL() << to_string(e); });
    EXPECT_EQ(got, x + 1);
  }

  std::optional<endpoint> server;
  caf::actor actor;
  uint16_t port = 0;
};

TEST_F(GuardedTransport, ServesALegitimatePeer) {
  expect_served();
  EXPECT_EQ(server->net.counts().refused_frames, 0u);
}

TEST_F(GuardedTransport, EveryCraftedFrameIsRefusedAndTheListenerServesOn) {
  const std::vector<std::vector<std::byte>> crafted = {
      frame({0, 0, 0, 0, 0, 1, 0, 0}),           // server handshake, no payload: CAF segfaults
      frame({1, 0, 0, 0, 0, 0, 0, 0}),           // client handshake, no payload: CAF segfaults
      frame({2, 0, 0, 0, 0xffffffffu, 0, 0, 1}), // a 4 GiB payload claimed
      frame({0x42, 0, 0, 0, 0, 0, 0, 0}),        // no such operation
      frame({2, 0, 0, 0, 8, 0, 0, 1}, 8),        // a message before any handshake
  };
  const auto rss_before = resident_kib();
  for (const auto& bytes : crafted) {
    raw_socket s(port);
    ASSERT_TRUE(s.connected);
    s.authenticate();
    s.send(bytes);
    EXPECT_TRUE(s.closed_within(5s));
  }
  EXPECT_EQ(server->net.counts().refused_frames, crafted.size());
  EXPECT_EQ(server->net.counts().refused_auth, 0u);
  EXPECT_EQ(server->net.counts().oversized_frames, 1u);
  EXPECT_LT(resident_kib() - rss_before, 256 * 1024) << "the 4 GiB claim was allocated";
  expect_served();
}

TEST_F(GuardedTransport, APeerWithoutTheCookieIsRefusedAtItsFirstBytes) {
  raw_socket s(port);
  s.send(frame({1, 0, 0, 0, 0, 0, 0, 0})); // BASP straight away: CAF 0.17 would segfault
  EXPECT_TRUE(s.closed_within(5s));
  EXPECT_EQ(server->net.counts().refused_auth, 1u);
  EXPECT_EQ(server->net.counts().refused_frames, 0u) << "no BASP byte reached the guard";
  expect_served();
}

TEST_F(GuardedTransport, APeerWithAnotherCookieCannotConnect) {
  endpoint stranger("another-users-cookie-0123456789");
  auto remote = stranger.net.remote_actor<caf::actor>("127.0.0.1", port);
  EXPECT_FALSE(remote);
  EXPECT_EQ(server->net.counts().refused_auth, 1u);
  raw_socket replay(port);
  replay.authenticate(); // a fresh nonce: an old proof would not do, the cookie does
  EXPECT_FALSE(replay.closed_within(200ms));
  expect_served();
}

TEST_F(GuardedTransport, GarbageOnManyConnectionsLeavesTheListenerServing) {
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    raw_socket s(port);
    if (i % 2) s.authenticate(); // half of it behind a valid proof
    std::vector<std::byte> junk(1 + rng() % 4096);
    for (auto& b : junk)
      b = static_cast<std::byte>(rng());
    s.send(junk);
    EXPECT_TRUE(s.closed_within(5s)) << "connection " << i;
  }
  expect_served();
}

// CAF does not fail a request whose connection drops; a monitor learns it at once (the driver
// monitors its ranks, `kvactor inject` its gateway).
TEST_F(GuardedTransport, AMessageAboveTheBoundIsRefusedAndTheSenderSeesTheConnectionGo) {
  endpoint client;
  auto remote = client.net.remote_actor<caf::actor>("127.0.0.1", port);
  ASSERT_TRUE(remote) << remote.err().message;
  caf::scoped_actor self{client.sys};
  self->monitor(*remote);
  self->send(*remote, std::string(1 << 20, 'x'));
  bool down = false;
  self->receive([&](int32_t) { FAIL() << "a 1 MiB message passed a 64 KiB bound"; },
                [&](caf::down_msg&) { down = true; },
                caf::after(std::chrono::seconds(10)) >> [] {});
  EXPECT_TRUE(down) << "the refusal must close the connection at once";
  EXPECT_EQ(server->net.counts().oversized_frames, 1u);
  expect_served();
}

TEST_F(GuardedTransport, AHalfOpenConnectionIsCutAtItsHandshakeDeadline) {
  raw_socket silent(port), half_greeting(port), half_header(port);
  const std::string kvaut = "kvaut";
  half_greeting.send({reinterpret_cast<const std::byte*>(kvaut.data()),
                      reinterpret_cast<const std::byte*>(kvaut.data()) + kvaut.size()});
  half_header.authenticate();
  half_header.send(std::vector<std::byte>(10, std::byte{1})); // a third of a BASP header
  EXPECT_TRUE(silent.closed_within(5s));
  EXPECT_TRUE(half_greeting.closed_within(5s));
  EXPECT_TRUE(half_header.closed_within(5s));
  EXPECT_EQ(server->net.counts().connections.timed_out, 3u);
  expect_served();
}

TEST_F(GuardedTransport, AFloodOfIdleConnectionsCannotLockOutALegitimatePeer) {
  std::vector<std::unique_ptr<raw_socket>> flood;
  for (int i = 0; i < 40; ++i) // five times the cap of 8 waiting connections
    flood.push_back(std::make_unique<raw_socket>(port));
  expect_served();
  EXPECT_TRUE(flood.front()->closed_within(5s));
  EXPECT_GE(server->net.counts().connections.evicted, 32u);
}

// A listening socket on a free loopback port that no CAF stands behind: (fd, port).
std::pair<int, uint16_t> raw_listener() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  EXPECT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof at;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len);
  return {fd, ntohs(at.sin_port)};
}

// A hostile server: it accepts and answers with the frame that crashes a CAF client.
TEST(GuardedTransportClient, AHostileServerFailsTheConnectNotTheProcess) {
  const auto [listener, port] = raw_listener();
  std::thread hostile([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    // It even holds the cookie: the frame guard still stands behind the proof.
    peer_auth auth(connection_side::accepted, test_cookie, peer_auth::random_nonce());
    auto greeting = auth.take_output();
    (void)::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL);
    std::vector<std::byte> proof(auth.wanted());
    (void)::recv(fd, proof.data(), proof.size(), MSG_WAITALL);
    (void)auth.feed(proof.data(), proof.size());
    auto mine = auth.take_output();
    (void)::send(fd, mine.data(), mine.size(), MSG_NOSIGNAL);
    const auto bad = frame({0, 0, 0, 0, 0, 1, 0, 0});
    (void)::send(fd, bad.data(), bad.size(), MSG_NOSIGNAL);
    // Drain until the client hangs up: closing with unread bytes would reset the connection
    // and discard the bad frame before the client reads it.
    char sink[256];
    while (::recv(fd, sink, sizeof sink, 0) > 0) {
    }
    ::close(fd);
  });
  endpoint client;
  auto remote = client.net.remote_actor<caf::actor>("127.0.0.1", port);
  EXPECT_FALSE(remote);
  EXPECT_EQ(client.net.counts().refused_frames, 1u) << (remote ? "" : remote.err().message);
  hostile.join();
  ::close(listener);
}

TEST(GuardedTransportClient, ASilentServerFailsTheConnectAtTheHandshakeDeadline) {
  // The kernel completes the connect; nobody ever answers.
  const auto [listener, port] = raw_listener();
  endpoint client;
  const auto t0 = std::chrono::steady_clock::now();
  auto remote = client.net.remote_actor<caf::actor>("127.0.0.1", port);
  EXPECT_FALSE(remote);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(client.net.counts().connections.timed_out, 1u);
  ::close(listener);
}

} // namespace
} // namespace kvactor
