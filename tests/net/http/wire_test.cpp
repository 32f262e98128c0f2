// The bytes of responses.
#include <gtest/gtest.h>

#include "net/http/wire.hpp"

namespace kvactor::http {
namespace {

TEST(HttpWire, AWholeResponseHeadCarriesItsLengthAndTheServerName) {
  EXPECT_EQ(response_head(200, "application/json", {{"X-A", "1"}}, 17, false),
            "HTTP/1.1 200 OK\r\nServer: kvactor\r\nContent-Type: application/json\r\n"
            "Content-Length: 17\r\nX-A: 1\r\n\r\n");
}

TEST(HttpWire, AStreamHeadIsChunkedAndMaySayClose) {
  EXPECT_EQ(response_head(200, "text/event-stream", {}, std::nullopt, true),
            "HTTP/1.1 200 OK\r\nServer: kvactor\r\nContent-Type: text/event-stream\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
}

TEST(HttpWire, ChunksAreFramedInHex) {
  EXPECT_EQ(chunk_of(std::string(26, 'z')), "1a\r\n" + std::string(26, 'z') + "\r\n");
  EXPECT_EQ(last_chunk, "0\r\n\r\n");
}

TEST(HttpWire, ARefusalNamesItsStatusInAnErrorObjectAndCloses) {
  const std::string r = refusal(431);
  EXPECT_EQ(r.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0), 0u);
  EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(r.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(r.find(R"({"error":{"message":"431 Request Header Fields Too Large",)"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find(R"("code":431}})"), std::string::npos) << r;
  EXPECT_EQ(reason_phrase(299), "Unknown");
}

} // namespace
} // namespace kvactor::http
