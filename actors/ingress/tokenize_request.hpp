// The bodies of vLLM's POST /tokenize and /detokenize, parsed and checked (pure). /tokenize takes
// a completions prompt (text) or a chat conversation (messages, rendered by the chat template as
// /v1/chat/completions renders it); /detokenize takes token ids.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/ingress/openai_request.hpp"

namespace kvactor::openai {

struct tokenize_request {
  std::string model;                 // empty: the one served
  std::optional<std::string> prompt; // the completions form
  std::optional<chat_request> chat;  // the messages form
  bool add_special_tokens = true;    // default: true for a prompt, false for messages
};

struct detokenize_request {
  std::string model;
  std::vector<int32_t> tokens;
};

api_expected<tokenize_request> parse_tokenize_request(std::string_view body);
api_expected<detokenize_request> parse_detokenize_request(std::string_view body);

} // namespace kvactor::openai
