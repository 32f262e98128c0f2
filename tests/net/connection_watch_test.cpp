// The connection watch: a connection without its handshake is cut at its deadline, the oldest is
// cut when too many wait, and a connection that finished its handshake or was forgotten is never
// touched. Socket pairs stand in for TCP connections: a cut shows as end-of-file on the other end.
#include "net/connection_watch.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <vector>

namespace kvactor {
namespace {

using namespace std::chrono_literals;

struct socket_pair {
  socket_pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()), 0); }
  ~socket_pair() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  int ours() const { return fds[0]; }
  // The peer reads end-of-file within `wait` (a cut), or the wait passes (no cut).
  bool peer_sees_cut(std::chrono::milliseconds wait = 0ms) const {
    pollfd p{fds[1], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return false;
    char c;
    return ::recv(fds[1], &c, 1, MSG_DONTWAIT) == 0;
  }
  std::array<int, 2> fds{-1, -1};
};

const auto t0 = connection_watch::clock::now();

TEST(ConnectionWatch, AConnectionWithoutItsHandshakeIsCutAtItsDeadline) {
  connection_watch watch({1000ms, 8});
  socket_pair s;
  watch.admit(s.ours(), true, t0);
  EXPECT_EQ(watch.expire(t0 + 999ms), 0u);
  EXPECT_FALSE(s.peer_sees_cut());
  EXPECT_EQ(watch.expire(t0 + 1000ms), 1u);
  EXPECT_TRUE(s.peer_sees_cut());
  EXPECT_EQ(watch.counts().timed_out, 1u);
  EXPECT_EQ(watch.pending(), 0u);
}

TEST(ConnectionWatch, AnEstablishedConnectionIsNeverCut) {
  connection_watch watch({1000ms, 8});
  socket_pair s;
  watch.established(watch.admit(s.ours(), true, t0));
  EXPECT_EQ(watch.expire(t0 + 1h), 0u);
  EXPECT_FALSE(s.peer_sees_cut());
  EXPECT_EQ(watch.counts().established, 1u);
}

TEST(ConnectionWatch, AForgottenConnectionIsNeverTouched) {
  connection_watch watch({1000ms, 1});
  socket_pair a, b;
  watch.forget(watch.admit(a.ours(), true, t0));
  watch.admit(b.ours(), true, t0); // the cap of 1 is free again: nothing evicted
  EXPECT_EQ(watch.expire(t0 + 1h), 1u);
  EXPECT_FALSE(a.peer_sees_cut());
  EXPECT_TRUE(b.peer_sees_cut());
  EXPECT_EQ(watch.counts().evicted, 0u);
}

TEST(ConnectionWatch, TheOldestWaitingConnectionMakesRoomForTheNewest) {
  connection_watch watch({10s, 2});
  std::vector<socket_pair> s(4);
  for (auto& p : s)
    watch.admit(p.ours(), true, t0);
  EXPECT_TRUE(s[0].peer_sees_cut());
  EXPECT_TRUE(s[1].peer_sees_cut());
  EXPECT_FALSE(s[2].peer_sees_cut());
  EXPECT_FALSE(s[3].peer_sees_cut());
  EXPECT_EQ(watch.counts().evicted, 2u);
  EXPECT_EQ(watch.pending(), 2u);
}

TEST(ConnectionWatch, APeerThatProvedItselfIsNeverEvictedByStrangers) {
  connection_watch watch({10s, 2});
  socket_pair peer;
  std::vector<socket_pair> strangers(5);
  watch.proven(watch.admit(peer.ours(), true, t0));
  for (auto& s : strangers)
    watch.admit(s.ours(), true, t0);
  EXPECT_FALSE(peer.peer_sees_cut()) << "a flood cannot push out a proven peer";
  EXPECT_EQ(watch.counts().evicted, 3u) << "strangers evict strangers";
  EXPECT_EQ(watch.expire(t0 + 10s), 3u) << "the proven peer still has its deadline";
  EXPECT_TRUE(peer.peer_sees_cut());
}

TEST(ConnectionWatch, OurOwnOutgoingConnectionsGetTheDeadlineButNotTheCap) {
  connection_watch watch({1000ms, 1});
  socket_pair outgoing, incoming;
  watch.admit(outgoing.ours(), false, t0);
  watch.admit(incoming.ours(), true, t0);
  EXPECT_FALSE(outgoing.peer_sees_cut());
  EXPECT_EQ(watch.counts().evicted, 0u);
  EXPECT_EQ(watch.expire(t0 + 1s), 2u);
  EXPECT_TRUE(outgoing.peer_sees_cut());
}

TEST(ConnectionWatch, ItsThreadCutsOverdueConnectionsByItself) {
  std::atomic<int> told{-1};
  connection_watch watch({50ms, 8}, [&](int fd, const char*) { told = fd; });
  watch.start();
  socket_pair s;
  watch.admit(s.ours(), true);
  EXPECT_TRUE(s.peer_sees_cut(10s));
  EXPECT_EQ(told.load(), s.ours()); // told before the cut
}

} // namespace
} // namespace kvactor
