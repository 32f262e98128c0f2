// The bodies kvactor answers with, in OpenAI's shapes: whole completions and chat completions
// with usage, stream chunks (the role in a chat stream's first chunk, finish_reason in the
// last, usage alone at the end), logprobs in each endpoint's shape, and SSE framing.
#include "actors/ingress/openai_response.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvactor::openai {
namespace {

using json = nlohmann::json;

const response_head head{"cmpl-7", 1700000000, "tiny"};

choice_text with_logprobs() {
  choice_text c{0, "Hi!", "stop", std::vector<token_logprob_text>{}, 5};
  c.logprobs->push_back({"Hi", -0.25f, {{"Hi", -0.25f}, {"Hey", -1.5f}}});
  c.logprobs->push_back({"!", -0.5f, {{"!", -0.5f}, {".", -1.0f}}});
  return c;
}

TEST(OpenAIResponse, ACompletionHasItsChoicesAndUsage) {
  const auto j = json::parse(completion_body(head, {{0, "a", "length"}, {1, "b", "stop"}}, {5, 3}));
  EXPECT_EQ(j["id"], "cmpl-7");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["text"], "b");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 8);
}

TEST(OpenAIResponse, CompletionLogprobsAreParallelListsWithTextOffsets) {
  const auto j = json::parse(completion_body(head, {with_logprobs()}, {1, 2}));
  const auto& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"Hi", "!"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.25, -0.5}));
  EXPECT_EQ(lp["text_offset"], json({5, 7}));
  EXPECT_EQ(lp["top_logprobs"][0]["Hey"], -1.5);
}

TEST(OpenAIResponse, AChatCompletionIsTheAssistantsMessage) {
  const auto j = json::parse(chat_body({"chatcmpl-1", 1, "tiny"}, {with_logprobs()}, {4, 2}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hi!");
  const auto& first = j["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(first["token"], "Hi");
  EXPECT_EQ(first["bytes"], json({72, 105}));
  EXPECT_EQ(first["top_logprobs"][1]["token"], "Hey");
}

TEST(OpenAIResponse, AChatStreamsFirstChunkCarriesTheRoleAndTheLastItsFinishReason) {
  const auto first = json::parse(chat_chunk(head, {0, "Hel", ""}, true));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "Hel");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const auto last = json::parse(chat_chunk(head, {0, "", "stop"}, false));
  EXPECT_FALSE(last["choices"][0]["delta"].contains("role"));
  EXPECT_FALSE(last["choices"][0]["delta"].contains("content"));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAIResponse, ACompletionChunkAndTheUsageChunk) {
  const auto c = json::parse(completion_chunk(head, {2, "lo", ""}));
  EXPECT_EQ(c["choices"][0]["index"], 2);
  EXPECT_EQ(c["choices"][0]["text"], "lo");
  EXPECT_TRUE(c["usage"].is_null());
  const auto u = json::parse(usage_chunk(head, true, {3, 4}));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 7);
}

TEST(OpenAIResponse, TextThatIsNotUtf8BecomesReplacementCharactersNotAnError) {
  const auto j = json::parse(completion_body(head, {{0, "a\xff", "stop"}}, {1, 1}));
  EXPECT_EQ(j["choices"][0]["text"], "a\xEF\xBF\xBD");
}

TEST(OpenAIResponse, EventsAreServerSentEventFrames) {
  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
  EXPECT_STREQ(sse_done, "data: [DONE]\n\n");
}

} // namespace
} // namespace kvactor::openai
