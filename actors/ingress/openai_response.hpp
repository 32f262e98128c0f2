// The bodies kvactor answers OpenAI's endpoints with (pure: no CAF, no I/O): a whole completion
// or chat completion, the server-sent-event chunks of a stream, usage, and logprobs in each
// endpoint's own shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvactor::openai {

/// One token's logprob as a client sees it: its text, and its position's most likely tokens.
struct token_logprob_text {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top; // most likely first
};

/// One choice: its text (or text delta), why it ended ("stop", "length"; empty: not yet), and
/// its tokens' logprobs when asked for.
struct choice_text {
  int32_t index = 0;
  std::string text;
  std::string finish_reason;
  std::optional<std::vector<token_logprob_text>> logprobs;
  int32_t text_offset = 0; // completions: where this text starts in the whole (echo included)
};

struct token_usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

/// Who answers: the response id ("cmpl-..." / "chatcmpl-..."), its creation time (Unix
/// seconds) and the model name served.
struct response_head {
  std::string id;
  int64_t created = 0;
  std::string model;
};

/// POST /v1/completions, whole: {"id", "object": "text_completion", "created", "model",
/// "choices": [{"index", "text", "logprobs", "finish_reason"}], "usage"}.
std::string completion_body(const response_head& head, const std::vector<choice_text>& choices,
                            const token_usage& usage);

/// One stream chunk of a completion (one choice's delta; usage null).
std::string completion_chunk(const response_head& head, const choice_text& choice);

/// POST /v1/chat/completions, whole: {"id", "object": "chat.completion", "created", "model",
/// "choices": [{"index", "message": {"role": "assistant", "content"}, "logprobs",
/// "finish_reason"}], "usage"}.
std::string chat_body(const response_head& head, const std::vector<choice_text>& choices,
                      const token_usage& usage);

/// One stream chunk of a chat completion: {"object": "chat.completion.chunk", "choices":
/// [{"index", "delta": {"role"? , "content"}, "logprobs", "finish_reason"}]}; the first chunk of
/// a choice carries the role.
std::string chat_chunk(const response_head& head, const choice_text& choice, bool first);

/// The last chunk of a stream with stream_options.include_usage: no choices, the usage.
std::string usage_chunk(const response_head& head, bool chat, const token_usage& usage);

/// A server-sent event carrying `json`, and the stream's end.
std::string sse_event(const std::string& json);
inline constexpr const char* sse_done = "data: [DONE]\n\n";

} // namespace kvactor::openai
