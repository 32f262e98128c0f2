// The server answers requests: whole responses, keep-alive, pipelining, chunked request bodies,
// answers from other threads, and its errors at start.
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/net/http/test_client.hpp"
#include "tests/net/http/test_support.hpp"

namespace kvactor::http::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(HttpExchange, AnswersAGetWithTheRequestAsParsed) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/v1/models?x=1", {}, "X-Custom: Yes\r\n")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->req.method, "GET");
  EXPECT_EQ(ex->req.target, "/v1/models?x=1");
  EXPECT_EQ(header(ex->req, "x-custom"), "Yes");
  EXPECT_EQ(header(ex->req, "host"), "test");
  EXPECT_EQ(header(ex->req, "absent"), std::nullopt);
  EXPECT_THAT(ex->req.remote, StartsWith("127.0.0.1:"));
  ex->res->respond(200, "application/json", "{}", {{"X-Request-Id", "7"}});
  auto r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{}");
  EXPECT_EQ(r.header("content-length"), "2");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("server"), "kvactor");
  EXPECT_EQ(r.header("x-request-id"), "7");
}

TEST(HttpExchange, AnswersAPostWithItsBody) {
  auto srv = must_start({}, echo());
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("POST", "/v1/completions", R"({"prompt":"hi"})")));
  auto r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"(POST /v1/completions {"prompt":"hi"})");
}

TEST(HttpExchange, KeepsAConnectionAliveForSeveralRequests) {
  auto srv = must_start({}, echo());
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client.send(request_bytes("POST", "/n", std::to_string(i))));
    auto r = client.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "POST /n " + std::to_string(i));
    EXPECT_EQ(r.header("connection"), "");
  }
  EXPECT_EQ(srv->open_connections(), 1u);
}

TEST(HttpExchange, AnswersPipelinedRequestsInOrder) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/1") + request_bytes("POST", "/2", "two")
                          + request_bytes("GET", "/3")));
  for (const char* target : {"/1", "/2", "/3"}) {
    auto ex = box.pop();
    ASSERT_TRUE(ex);
    EXPECT_EQ(ex->req.target, target); // the next request reaches the handler once this is done
    ex->res->respond(200, "text/plain", target);
  }
  for (const char* target : {"/1", "/2", "/3"})
    EXPECT_EQ(client.read_response().body, target);
}

TEST(HttpExchange, DeChunksAChunkedRequestBody) {
  auto srv = must_start({}, echo());
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send("POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"));
  EXPECT_EQ(client.read_response().body, "POST /c hello, world");
}

TEST(HttpExchange, SendsAnAnswerProducedLaterOnAnotherThread) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/later")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  std::thread producer([res = ex->res] { res->respond(202, "text/plain", "done"); });
  producer.join();
  auto r = client.read_response();
  EXPECT_EQ(r.status, 202);
  EXPECT_EQ(r.body, "done");
}

TEST(HttpExchange, HonoursConnectionCloseAndClosesAfterTheAnswer) {
  auto srv = must_start({}, echo());
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/bye", {}, "Connection: close\r\n")));
  auto r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(client.sees_close());
}

TEST(HttpExchange, ClosesAnHttp10ConnectionAfterTheAnswer) {
  auto srv = must_start({}, echo());
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send("GET /old HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(client.read_response().header("connection"), "close");
  EXPECT_TRUE(client.sees_close());
}

TEST(HttpExchange, AnswersExpectContinueBeforeTheBody) {
  auto srv = must_start({}, echo());
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
                          "Expect: 100-continue\r\n\r\n"));
  EXPECT_EQ(client.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(client.send("body"));
  EXPECT_EQ(client.read_response().body, "POST /big body");
}

TEST(HttpExchange, AnswersAHandlerThatThrowsWith500) {
  auto srv = must_start(
      {}, [](request, std::shared_ptr<responder>) { throw std::runtime_error("handler bug"); });
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/")));
  EXPECT_EQ(client.read_response().status, 500);
}

TEST(HttpExchange, IgnoresCallsOutOfOrder) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/1") + request_bytes("GET", "/2")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  ex->res->write("before any head"); // no stream begun: dropped
  ex->res->end_stream();
  ex->res->respond(200, "text/plain", "first");
  ex->res->respond(500, "text/plain", "second answer"); // already answered: dropped
  ex->res->write("after");
  auto next = box.pop();
  ASSERT_TRUE(next);
  next->res->respond(200, "text/plain", "next");
  EXPECT_EQ(client.read_response().body, "first");
  EXPECT_EQ(client.read_response().body, "next");
}

TEST(HttpExchange, DropsExtraHeadersThatWouldSplitTheHeadOrRepeatItsFraming) {
  mailbox<exchange> box;
  auto srv = must_start({}, hand_to(box));
  ASSERT_TRUE(srv);
  test_client client(srv->port());
  ASSERT_TRUE(client.send(request_bytes("GET", "/")));
  auto ex = box.pop();
  ASSERT_TRUE(ex);
  ex->res->respond(200, "text/plain", "ok",
                   {{"X-Evil", "a\r\nSet-Cookie: b"}, {"Content-Length", "99"}, {"X-Good", "1"}});
  auto r = client.read_response();
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.header("x-evil"), "");
  EXPECT_EQ(r.header("set-cookie"), "");
  EXPECT_EQ(r.header("content-length"), "2");
  EXPECT_EQ(r.header("x-good"), "1");
}

TEST(HttpExchange, ServesManyClientsAtOnceOnSeveralIoThreads) {
  server_options options;
  options.threads = 4;
  auto srv = must_start(options, echo());
  ASSERT_TRUE(srv);
  constexpr int clients = 16, requests = 50;
  std::vector<std::thread> threads;
  std::vector<int> answered(clients, 0);
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      test_client client(srv->port());
      for (int i = 0; i < requests; ++i) {
        const std::string body = std::to_string(c) + "/" + std::to_string(i);
        if (!client.send(request_bytes("POST", "/m", body))) return;
        if (client.read_response().body != "POST /m " + body) return;
        ++answered[c];
      }
    });
  for (auto& t : threads)
    t.join();
  for (int c = 0; c < clients; ++c)
    EXPECT_EQ(answered[c], requests) << "client " << c;
}

TEST(HttpServerStart, NamesTheAddressWhenThePortIsInUse) {
  auto first = must_start({}, echo());
  ASSERT_TRUE(first);
  server_options options;
  options.port = first->port();
  auto second = server::start(options, echo());
  ASSERT_FALSE(second);
  EXPECT_EQ(second.err().code, errc::io_error);
  EXPECT_THAT(second.err().message, HasSubstr("127.0.0.1:" + std::to_string(first->port())));
  EXPECT_THAT(second.err().message, HasSubstr("in use"));
}

TEST(HttpServerStart, RefusesAHostThatIsNotAnAddress) {
  server_options options;
  options.host = "not an address";
  auto s = server::start(options, echo());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.err().code, errc::invalid_argument);
  EXPECT_THAT(s.err().message, HasSubstr("'not an address'"));
}

} // namespace
} // namespace kvactor::http::test
