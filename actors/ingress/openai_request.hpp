// The bodies of OpenAI's POST /v1/completions and /v1/chat/completions, parsed and checked
// before anything else sees them (pure: no CAF, no I/O). Unknown fields are ignored, as OpenAI
// does; a known field of the wrong type or out of range is an api_error naming it (`param`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvactor::openai {

/// OpenAI's error object: the HTTP status and {"error": {"message", "type", "param", "code"}}.
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "BadRequestError";
  std::string param; // the request field at fault; empty when none
  std::string code;

  /// The response body.
  std::string body() const;
};

/// A value or the api_error that refused it.
template <class T>
class api_expected {
public:
  api_expected(T value) : v_(std::move(value)) {}
  api_expected(api_error err) : v_(std::move(err)) {}
  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const api_error& err() const { return std::get<1>(v_); }

private:
  std::variant<T, api_error> v_;
};

/// 400 naming the field.
api_error bad_param(std::string param, std::string message);

/// What both endpoints share: how to sample, when to stop, what to report.
struct generation_request {
  std::string model;                 // empty: the one served
  std::optional<int64_t> max_tokens; // none: up to the model's length
  double temperature = 1.0;          // OpenAI's default; 0: greedy
  double top_p = 1.0;
  int32_t top_k = 0; // 0 (or vLLM's -1): the whole vocabulary
  std::optional<uint64_t> seed;
  std::vector<std::string> stop; // strings that end the text (trimmed from it)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t n = 1;                   // independent samples of the prompt
  std::optional<int32_t> logprobs; // top alternatives per token (0: the token's own only)
  bool echo = false;               // completions: the prompt before the text
  bool stream = false;
  bool include_usage = false; // stream_options.include_usage
  bool skip_special_tokens = true;
  std::string user;
};

/// A completions prompt: text, or token ids.
using prompt_input = std::variant<std::string, std::vector<int32_t>>;

struct completion_request {
  generation_request gen;
  std::vector<prompt_input> prompts; // one choice set per prompt
};

struct chat_request {
  generation_request gen;
  nlohmann::ordered_json messages; // [{role, content, ...}], as the chat template reads them
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  nlohmann::ordered_json tools;                // null when none
  nlohmann::ordered_json chat_template_kwargs; // object (e.g. enable_thinking), or null
};

/// The most samples one request may ask for (n).
inline constexpr int32_t max_n = 128;

api_expected<completion_request> parse_completion_request(std::string_view body);
api_expected<chat_request> parse_chat_request(std::string_view body);

} // namespace kvactor::openai
