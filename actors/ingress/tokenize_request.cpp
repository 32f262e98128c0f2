#include "actors/ingress/tokenize_request.hpp"

#include "actors/ingress/json_fields.hpp"

namespace kvactor::openai {

namespace {

// vLLM's `return_token_strs` gives the vocabulary's pieces, which no tokenizer here exposes: a
// client that asks for them is told so rather than given something else.
maybe_error refuse_token_strs(const json& o) {
  bool wanted = false;
  if (auto e = read_bool(o, "return_token_strs", wanted)) return e;
  if (wanted) return bad_param("return_token_strs", "'return_token_strs' is not served");
  return std::nullopt;
}

} // namespace

api_expected<tokenize_request> parse_tokenize_request(std::string_view body) {
  auto root = parse_object(body);
  if (!root) return root.err();
  tokenize_request r;
  if (auto e = read_string(*root, "model", r.model)) return *e;
  if (auto e = refuse_token_strs(*root)) return *e;
  const json* prompt = field(*root, "prompt");
  const json* messages = field(*root, "messages");
  if ((prompt == nullptr) == (messages == nullptr))
    return bad_param(prompt == nullptr ? "prompt" : "messages",
                     "give either 'prompt' (a string) or 'messages' (a conversation)");
  if (messages != nullptr) {
    auto chat = parse_chat_request(body);
    if (!chat) return chat.err();
    r.chat = std::move(*chat);
    r.add_special_tokens = false; // the template writes them
  } else {
    if (!prompt->is_string()) return wrong_type("prompt", "a string", *prompt);
    r.prompt = prompt->get<std::string>();
  }
  if (auto e = read_bool(*root, "add_special_tokens", r.add_special_tokens)) return *e;
  return r;
}

api_expected<detokenize_request> parse_detokenize_request(std::string_view body) {
  auto root = parse_object(body);
  if (!root) return root.err();
  detokenize_request r;
  if (auto e = read_string(*root, "model", r.model)) return *e;
  const json* tokens = field(*root, "tokens");
  if (tokens == nullptr) return bad_param("tokens", "'tokens' is required");
  if (auto e = read_ids(*tokens, "tokens", r.tokens)) return *e;
  return r;
}

} // namespace kvactor::openai
