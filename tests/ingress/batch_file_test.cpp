// OpenAI's batch file: an input line becomes a request for its endpoint, or an error naming the
// line and what is wrong with it; answers and errors become output lines of OpenAI's shape.
#include "actors/ingress/batch_file.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvactor::openai {
namespace {

using json = nlohmann::json;

TEST(BatchFile, ALineBecomesARequestForItsEndpointWithItsBody) {
  const auto l = parse_batch_line(R"({"custom_id": "a", "method": "POST",
      "url": "/v1/chat/completions", "body": {"messages": [], "max_tokens": 3}})",
                                  1);
  ASSERT_TRUE(l.request) << l.error;
  EXPECT_EQ(l.request->custom_id, "a");
  EXPECT_EQ(l.request->kind, endpoint::chat_completions);
  EXPECT_EQ(json::parse(l.request->body)["max_tokens"], 3);
  const auto c = parse_batch_line(
      R"({"custom_id": "b", "url": "/v1/completions", "body": {"prompt": "x"}})", 2);
  ASSERT_TRUE(c.request) << c.error << " (method defaults to POST)";
  EXPECT_EQ(c.request->kind, endpoint::completions);
}

TEST(BatchFile, ALineThatIsNoRequestIsRefusedNamingTheLineAndWhy) {
  struct bad_case {
    const char* line;
    const char* custom_id;
    const char* words;
  };
  const bad_case cases[] = {
      {R"({"custom_id": "a", "url": "/v1/completions", "body": {)", "", "not valid JSON"},
      {R"([1, 2])", "", "JSON object"},
      {R"({"url": "/v1/completions", "body": {}})", "", "'custom_id'"},
      {R"({"custom_id": 7, "url": "/v1/completions", "body": {}})", "", "'custom_id'"},
      {R"({"custom_id": "a", "method": "GET", "url": "/v1/completions", "body": {}})", "a",
       "GET is not POST"},
      {R"({"custom_id": "a", "url": "/v1/embeddings", "body": {}})", "a", "/v1/embeddings"},
      {R"({"custom_id": "a", "url": "/v1/completions", "body": "x"})", "a", "'body'"},
      {R"({"custom_id": "a", "url": "/v1/completions", "body": {"stream": true}})", "a",
       "whole responses"},
  };
  for (const auto& c : cases) {
    const auto l = parse_batch_line(c.line, 4);
    EXPECT_FALSE(l.request) << c.line;
    EXPECT_EQ(l.custom_id, c.custom_id) << c.line;
    EXPECT_EQ(l.error.rfind("line 4: ", 0), 0u) << l.error;
    EXPECT_NE(l.error.find(c.words), std::string::npos) << c.line << ": " << l.error;
  }
}

TEST(BatchFile, AnAnswerIsAResponseLineWithItsStatusAndBody) {
  const auto j = json::parse(
      batch_response_line("batch_req_1", "a", 400, "req_1", R"({"error": {"param": "x"}})"));
  EXPECT_EQ(j["id"], "batch_req_1");
  EXPECT_EQ(j["custom_id"], "a");
  EXPECT_EQ(j["response"]["status_code"], 400);
  EXPECT_EQ(j["response"]["request_id"], "req_1");
  EXPECT_EQ(j["response"]["body"]["error"]["param"], "x") << "the body is JSON, not a string";
  EXPECT_TRUE(j["error"].is_null());
}

TEST(BatchFile, ALineThatIsNoRequestGetsAnErrorLineWithoutAResponse) {
  const auto j = json::parse(batch_error_line("batch_req_2", "", "line 3: not JSON"));
  EXPECT_TRUE(j["custom_id"].is_null()) << "no custom_id could be read";
  EXPECT_TRUE(j["response"].is_null());
  EXPECT_EQ(j["error"]["message"], "line 3: not JSON");
  EXPECT_EQ(json::parse(batch_error_line("i", "a", "why"))["custom_id"], "a");
}

} // namespace
} // namespace kvactor::openai
