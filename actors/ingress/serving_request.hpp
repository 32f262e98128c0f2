// One OpenAI request while it is served (pure: no CAF, no I/O): its engine requests (one per
// choice: each prompt times n), and what each engine update turns into for the client: stream
// chunks as tokens arrive, or the whole body once every choice ended; the engine requests to
// abort when a stop string ends a choice's text; usage.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/ingress/openai_request.hpp"
#include "actors/ingress/openai_response.hpp"
#include "actors/ingress/text_stream.hpp"
#include "messages/engine_config.hpp"
#include "messages/request.hpp"
#include "model/tokenizer.hpp"

namespace kvactor::openai {

/// The endpoint a call came to; tokenize and detokenize are answered at once, without the engine.
enum class endpoint : uint8_t { completions, chat_completions, tokenize, detokenize };

/// What the ingress does after an update.
struct ingress_output {
  std::vector<std::string> events; // stream: server-sent events to write now, in order
  std::optional<std::string> body; // whole: the response, once every choice ended
  std::optional<api_error> error;  // whole: the error to answer instead (a choice failed)
  std::vector<uint64_t> aborts;    // engine requests to abort (a stop string ended them)
  bool complete = false;           // the answer is complete: end the stream or respond
};

/// Everything a request needs besides its body; the scheduler's limits as resolved for the model
/// (max_model_len: the model's length).
struct serving_setup : scheduler_limits {
  endpoint kind = endpoint::completions;
  generation_request gen;
  std::vector<std::vector<int32_t>> prompts; // token ids, one per prompt (chat: the rendered one)
  std::vector<std::string> prompt_texts;     // completions' echo: each prompt's text
  response_head head;
  uint64_t first_engine_id = 0;   // choice i is engine request first_engine_id + i
  const tokenizer* tok = nullptr; // outlives the request
  std::vector<int32_t> eos_token_ids;
  int32_t vocab_size = 0;
  uint64_t entropy = 0; // the draw seed of a sampled request that gave none
};

class serving_request {
public:
  /// Checks what needs the model (prompt ids inside the vocabulary, prompt and max_tokens within
  /// max_model_len in vLLM's words) and prepares every choice.
  static api_expected<serving_request> create(serving_setup s);

  /// The engine requests to submit: one per choice, choice order.
  const std::vector<request_spec>& engine_requests() const { return specs_; }
  /// Every engine request's id (to abort them all when the client goes away).
  std::vector<uint64_t> engine_ids() const;

  /// One engine update of one of this request's choices.
  ingress_output on_update(const request_update& u);

  bool complete() const { return open_choices_ == 0; }
  bool streaming() const { return s_.gen.stream; }
  int64_t completion_tokens() const { return completion_tokens_; }

private:
  struct choice {
    std::unique_ptr<text_stream> text;
    std::string whole; // whole answers: the text so far
    std::vector<token_logprob_text> logprobs;
    std::string finish_reason; // set once ended
    bool told_role = false;    // chat streams: the role went out
    int32_t text_offset = 0;
  };

  explicit serving_request(serving_setup s) : s_(std::move(s)) {}
  void add_choices();
  token_logprob_text logprob_text(int32_t token, const token_logprobs& lp) const;
  void take_tokens(size_t i, const request_update& u, ingress_output& out);
  void end_choice(size_t i, std::string reason, ingress_output& out);
  void stream_chunk(size_t i, std::string text, std::vector<token_logprob_text> lps,
                    ingress_output& out);
  void finish_answer(ingress_output& out);

  serving_setup s_;
  std::vector<request_spec> specs_;
  std::vector<choice> choices_;
  size_t open_choices_ = 0;
  int64_t completion_tokens_ = 0;
  bool failed_ = false;
};

} // namespace kvactor::openai
