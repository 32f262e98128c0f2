// Every limit and every kind of bad bytes: a refusal status, then the connection closes; the
// server goes on serving others.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/net/http/test_client.hpp"
#include "tests/net/http/test_support.hpp"

namespace kvactor::http::test {
namespace {

// Sends `bytes` on a fresh connection; the status of the answer, the connection then closed.
int refusal_of(uint16_t port, const std::string& bytes) {
  test_client client(port);
  if (!client.send(bytes)) return -1;
  auto r = client.read_response();
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(r.header("server"), "kvactor");
  EXPECT_TRUE(client.sees_close());
  return r.status;
}

TEST(HttpLimits, RefusesABodyAboveTheLimitWith413) {
  server_options options;
  options.max_body_bytes = 1000;
  auto srv = must_start(options, echo());
  ASSERT_TRUE(srv);
  EXPECT_EQ(refusal_of(srv->port(), request_bytes("POST", "/", std::string(1001, 'a'))), 413);
  // Said by Content-Length alone, before any of the body came.
  EXPECT_EQ(refusal_of(srv->port(), "POST / HTTP/1.1\r\nContent-Length: 5000000000\r\n\r\n"), 413);
  // Reached while chunked.
  const std::string chunk = "200\r\n" + std::string(0x200, 'b') + "\r\n";
  EXPECT_EQ(refusal_of(srv->port(),
                       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk + chunk),
            413);
  // At the limit it is served.
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("POST", "/", std::string(1000, 'a'))));
  EXPECT_EQ(client.read_response().status, 200);
}

TEST(HttpLimits, RefusesAHeaderAboveTheLimitWith431) {
  server_options options;
  options.max_header_bytes = 1024;
  auto srv = must_start(options, echo());
  ASSERT_TRUE(srv);
  const std::string big = "X-Big: " + std::string(2000, 'h') + "\r\n";
  EXPECT_EQ(refusal_of(srv->port(), request_bytes("GET", "/", {}, big)), 431);
  // A head that never ends is refused once it passes the limit.
  EXPECT_EQ(refusal_of(srv->port(), "GET /" + std::string(4000, 'p')), 431);
  // So is a chunk's size line (an endless chunk extension) in the body.
  EXPECT_EQ(refusal_of(srv->port(), "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;"
                                        + std::string(4000, 'e')),
            400);
}

TEST(HttpLimits, AnswersMalformedBytesWith400AndCloses) {
  auto srv = must_start({}, echo());
  ASSERT_TRUE(srv);
  const std::vector<std::string> bad = {
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS hello\r\n\r\n",
      "hello there\r\n\r\n",
      "GET / HTTP/1.1\r\nno colon here\r\n\r\n",
      "GET / HTTP/x.y\r\n\r\n",
      "G@T / HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhi\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhiX\r\n0\r\n\r\n",
      std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 27),
  };
  for (const auto& bytes : bad)
    EXPECT_EQ(refusal_of(srv->port(), bytes), 400) << bytes;
  test_client client(srv->port()); // still serving
  ASSERT_TRUE(client.send(request_bytes("GET", "/ok")));
  EXPECT_EQ(client.read_response().status, 200);
}

TEST(HttpLimits, RefusesConnectionsBeyondTheLimitWith503) {
  server_options options;
  options.max_connections = 2;
  auto srv = must_start(options, echo());
  ASSERT_TRUE(srv);
  std::vector<std::unique_ptr<test_client>> admitted;
  for (int i = 0; i < 2; ++i) {
    admitted.push_back(std::make_unique<test_client>(srv->port()));
    ASSERT_TRUE(admitted.back()->send(request_bytes("GET", "/")));
    ASSERT_EQ(admitted.back()->read_response().status, 200); // admitted by now
  }
  EXPECT_EQ(srv->open_connections(), 2u);
  test_client third(srv->port());
  auto r = third.read_response();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(third.sees_close());
  EXPECT_EQ(srv->open_connections(), 2u);
  // A place freed is given to the next connection.
  admitted.front()->close();
  admitted.erase(admitted.begin());
  for (int attempt = 0;; ++attempt) {
    test_client next(srv->port());
    ASSERT_TRUE(next.send(request_bytes("GET", "/again")));
    auto answer = next.read_response();
    if (answer.status == 200) break;
    ASSERT_EQ(answer.status, 503); // the server may not have seen the close yet
    ASSERT_LT(attempt, 1000);
  }
}

TEST(HttpLimits, ClosesAKeepAliveConnectionIdleForTheTimeout) {
  server_options options;
  options.idle_timeout = std::chrono::seconds(1);
  auto srv = must_start(options, echo());
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/")));
  EXPECT_EQ(client.read_response().status, 200);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(client.sees_close());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_EQ(srv->open_connections(), 0u);
}

TEST(HttpLimits, KeepsARequestInProgressOpenPastTheIdleTimeout) {
  mailbox<exchange> box;
  server_options options;
  options.idle_timeout = std::chrono::seconds(1);
  auto srv = must_start(options, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/slow")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  // The handler thinks for longer than the idle timeout; the test waits on an event that never
  // comes, which is how long it thinks.
  event never;
  EXPECT_FALSE(never.wait(2500ms));
  EXPECT_FALSE(ex->res->closed());
  ex->res->respond(200, "text/plain", "slow");
  EXPECT_EQ(client.read_response().body, "slow");
}

} // namespace
} // namespace kvactor::http::test
