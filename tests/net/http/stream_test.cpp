// Streamed answers: chunks leave as they are written; a client that goes away (or reads too
// slowly) ends the exchange, fires on_disconnect and frees what the exchange held.
#include <atomic>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/net/http/test_client.hpp"
#include "tests/net/http/test_support.hpp"

namespace kvactor::http::test {
namespace {

TEST(HttpStream, SendsEachChunkBeforeTheNextIsWritten) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("POST", "/v1/chat/completions", "{}")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  ex->res->begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  auto head = client.read_head();
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("transfer-encoding"), "chunked");
  EXPECT_EQ(head.header("content-type"), "text/event-stream");
  EXPECT_EQ(head.header("cache-control"), "no-cache");
  EXPECT_EQ(head.header("server"), "kvactor");
  EXPECT_EQ(head.header("content-length"), "");
  std::thread producer([res = ex->res] { res->write("data: first\n\n"); });
  producer.join();
  // The client holds the first chunk while the last is not written yet: nothing is buffered.
  EXPECT_EQ(client.read_chunk(), "data: first\n\n");
  ex->res->write("data: [DONE]\n\n");
  ex->res->end_stream();
  EXPECT_EQ(client.read_chunk(), "data: [DONE]\n\n");
  EXPECT_EQ(client.read_chunk(), "");
  // The connection serves the next request after the stream.
  ASSERT_TRUE(client.send(request_bytes("GET", "/after")));
  auto next = box.pop();
  ASSERT_TRUE(next);
  next->res->respond(200, "text/plain", "after");
  EXPECT_EQ(client.read_response().body, "after");
}

TEST(HttpStream, AClientLeavingMidStreamFiresOnDisconnectAndLaterWritesAreDropped) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/stream")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  event gone;
  std::atomic<int> calls{0};
  ex->res->on_disconnect([&] {
    ++calls;
    gone.set();
  });
  ex->res->begin_stream(200, "text/event-stream");
  ex->res->write("data: 1\n\n");
  EXPECT_EQ(client.read_head().status, 200);
  EXPECT_EQ(client.read_chunk(), "data: 1\n\n");
  client.close();
  ASSERT_TRUE(gone.wait());
  EXPECT_TRUE(ex->res->closed());
  EXPECT_EQ(srv->open_connections(), 0u);
  ex->res->write("data: 2\n\n"); // quietly dropped
  ex->res->end_stream();
  event late;
  ex->res->on_disconnect([&] { late.set(); }); // registered after: runs at once
  EXPECT_TRUE(late.wait(0ms));
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpStream, AnUnansweredRequestIsFreedWhenTheClientLeaves) {
  // The handler keeps nothing: once the client leaves, the responder must be gone too.
  struct sentinel {
    explicit sentinel(event* e) : freed(e) {}
    sentinel(const sentinel&) = delete;
    ~sentinel() { freed->set(); }
    event* freed;
  };
  event freed;
  mailbox<std::weak_ptr<responder>> seen;
  auto srv = must_start({}, [&](request, std::shared_ptr<responder> res) {
    auto token = std::make_shared<sentinel>(&freed);
    res->on_disconnect([token] {});
    seen.push(res);
  });
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/never")));
  auto weak = seen.pop();
  ASSERT_TRUE(weak);
  client.close();
  ASSERT_TRUE(freed.wait()); // the callback (and its capture) released
  EXPECT_TRUE(weak->expired());
}

// The largest buffer the kernel gives a TCP socket (the third number of /proc/sys/net/ipv4/NAME).
size_t kernel_buffer_max(const char* name) {
  std::ifstream in(std::string("/proc/sys/net/ipv4/") + name);
  size_t min = 0, initial = 0, max = size_t{16} << 20; // unreadable: a generous guess
  in >> min >> initial >> max;
  return max;
}

TEST(HttpStream, ACompletedAnswerReleasesItsDisconnectCallbacks) {
  // A callback holding its own responder would keep it alive forever if it stayed registered.
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/1")));
  std::weak_ptr<responder> weak;
  {
    auto ex = box.pop();
    ASSERT_TRUE(ex);
    weak = ex->res;
    ex->res->on_disconnect([res = ex->res] { res->end_stream(); });
    ex->res->respond(200, "text/plain", "done");
  }
  EXPECT_EQ(client.read_response().body, "done");
  // The next exchange on the connection runs after the first completed on the same strand.
  ASSERT_TRUE(client.send(request_bytes("GET", "/2")));
  auto next = box.pop();
  ASSERT_TRUE(next);
  EXPECT_TRUE(weak.expired());
  next->res->respond(200, "text/plain", "next");
  EXPECT_EQ(client.read_response().body, "next");
}

TEST(HttpStream, CutsAStreamWhoseReaderFallsBehind) {
  mailbox<exchange> box;
  server_options options;
  options.max_buffered_bytes = 64 << 10;
  auto srv = must_start(options, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/firehose")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  event cut;
  ex->res->on_disconnect([&] { cut.set(); });
  ex->res->begin_stream(200, "application/octet-stream");
  // The client reads nothing: once the kernel's socket buffers are full, unsent bytes pile up
  // past the limit. Writing what both buffers can hold at most, and then some, must reach it.
  const std::string chunk(64 << 10, 'x');
  const size_t enough = kernel_buffer_max("tcp_wmem") + kernel_buffer_max("tcp_rmem")
                        + 4 * options.max_buffered_bytes;
  for (size_t sent = 0; sent < enough && !ex->res->closed(); sent += chunk.size())
    ex->res->write(chunk);
  ASSERT_TRUE(cut.wait());
  EXPECT_TRUE(ex->res->closed());
  EXPECT_TRUE(client.sees_close());
}

TEST(HttpStream, KeepsAStreamWhoseReaderKeepsUp) {
  mailbox<exchange> box;
  server_options options;
  options.max_buffered_bytes = 64 << 10;
  auto srv = must_start(options, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/paced")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  ex->res->begin_stream(200, "application/octet-stream");
  ASSERT_EQ(client.read_head().status, 200);
  const std::string chunk(48 << 10, 'y');
  for (int i = 0; i < 64; ++i) { // 3 MiB in all, never more than one chunk unsent
    ex->res->write(chunk);
    ASSERT_EQ(client.read_chunk(), chunk) << "chunk " << i;
  }
  ex->res->end_stream();
  EXPECT_EQ(client.read_chunk(), "");
  EXPECT_FALSE(ex->res->closed());
}

} // namespace
} // namespace kvactor::http::test
