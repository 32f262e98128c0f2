// The connect probe cluster mode runs before CAF's middleman: it answers within its deadline.
#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tcp_probe.hpp"

namespace kvactor::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A socket listening on a free loopback port, closed at the end of the test.
struct listener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~listener() { ::close(fd); }
};

TEST(TcpProbe, ReachesAListeningPort) {
  listener l;
  ASSERT_GT(l.port, 0);
  auto ok = tcp_probe("127.0.0.1", l.port, 3000ms);
  EXPECT_TRUE(ok) << ok.err().message;
}

TEST(TcpProbe, AClosedPortIsRefusedAtOnceNamingTheAddress) {
  uint16_t port = 0;
  {
    listener l; // bound, then closed: nothing listens there now
    port = l.port;
  }
  const auto started = std::chrono::steady_clock::now();
  auto refused = tcp_probe("127.0.0.1", port, 3000ms);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.err().code, errc::io_error);
  EXPECT_THAT(refused.err().message, HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(refused.err().message, HasSubstr("refused"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3000ms);
}

TEST(TcpProbe, AnAddressThatNeverAnswersFailsWithinTheDeadline) {
  // 192.0.2.1 (TEST-NET-1) is never routed: the SYN is dropped (no answer) or the network is
  // unreachable at once; either way the probe ends by its deadline, not the kernel's retries.
  const auto started = std::chrono::steady_clock::now();
  auto lost = tcp_probe("192.0.2.1", 7400, 500ms);
  ASSERT_FALSE(lost);
  EXPECT_THAT(lost.err().message, HasSubstr("192.0.2.1:7400"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2000ms);
}

TEST(TcpProbe, AnUnknownHostIsAnErrorNamingIt) {
  auto unknown = tcp_probe("no-such-host.invalid", 7400, 500ms);
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.err().message, HasSubstr("no-such-host.invalid:7400: cannot resolve"));
}

} // namespace
} // namespace kvactor::test
