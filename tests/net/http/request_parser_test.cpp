// The request parser on its own: bytes in any split, pipelined leftovers, its limits.
#include <string>

#include <gtest/gtest.h>

#include "net/http/request_parser.hpp"

namespace kvactor::http {
namespace {

TEST(HttpRequestParser, ParsesARequestFedOneByteAtATime) {
  const std::string bytes = "POST /x?y=1 HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 3\r\n\r\nabc";
  request_parser parser({});
  std::string pending;
  for (char c : bytes) {
    pending += c;
    pending.erase(0, parser.feed(pending));
    ASSERT_EQ(parser.refused(), 0);
  }
  ASSERT_TRUE(parser.done());
  EXPECT_TRUE(parser.keep_alive());
  request req = parser.take();
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/x?y=1");
  EXPECT_EQ(req.body, "abc");
  EXPECT_EQ(header(req, "content-type"), "text/plain");
}

TEST(HttpRequestParser, LeavesTheNextPipelinedRequestUnconsumed) {
  const std::string first = "GET /1 HTTP/1.1\r\n\r\n";
  const std::string second = "GET /2 HTTP/1.1\r\nConnection: close\r\n\r\n";
  request_parser parser({});
  EXPECT_EQ(parser.feed(first + second), first.size());
  ASSERT_TRUE(parser.done());
  EXPECT_EQ(parser.take().target, "/1");
  request_parser next({});
  EXPECT_EQ(next.feed(second), second.size());
  ASSERT_TRUE(next.done());
  EXPECT_FALSE(next.keep_alive());
}

TEST(HttpRequestParser, WaitsForMoreBytesOfAnUnfinishedHead) {
  request_parser parser({});
  const std::string partial = "GET / HTTP/1.1\r\nHost: h\r\nAccept";
  const size_t used = parser.feed(partial);
  EXPECT_LT(used, partial.size()); // the unfinished header line is left to feed again
  EXPECT_FALSE(parser.done());
  EXPECT_EQ(parser.refused(), 0);
  EXPECT_EQ(parser.feed(partial.substr(used) + ": */*\r\n\r\n"), partial.size() - used + 9);
  ASSERT_TRUE(parser.done());
  EXPECT_EQ(header(parser.take(), "accept"), "*/*");
}

TEST(HttpRequestParser, RefusesByLimitAndByMalformedBytes) {
  request_parser body({.max_body_bytes = 10, .max_header_bytes = 1024});
  body.feed("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n");
  EXPECT_EQ(body.refused(), 413);
  request_parser head({.max_body_bytes = 10, .max_header_bytes = 64});
  head.feed("GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.refused(), 431);
  request_parser garbage({});
  garbage.feed("\x01\x02\x03\r\n\r\n");
  EXPECT_EQ(garbage.refused(), 400);
  EXPECT_FALSE(garbage.done());
  EXPECT_EQ(garbage.feed("GET / HTTP/1.1\r\n\r\n"), 0u); // refused: consumes nothing more
}

TEST(HttpRequestParser, AsksToContinueOnceWhileTheBodyIsToCome) {
  request_parser parser({});
  parser.feed("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_TRUE(parser.take_continue());
  EXPECT_FALSE(parser.take_continue());
  parser.feed("ok");
  EXPECT_TRUE(parser.done());
}

} // namespace
} // namespace kvactor::http
