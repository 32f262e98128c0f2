// libFuzzer target: a request body as a client POSTs it to kvactor serve, or a line of a batch
// file, through the ingress's whole front half: the first byte picks the endpoint (completions,
// chat, tokenize, detokenize, or a batch line whose body then goes to its endpoint), the rest is
// the body. Each call is answered at once (a status from OpenAI's set, a JSON error object) or
// becomes engine requests whose prompts lie in the vocabulary and fit the model's length; it never
// crashes, and nothing is answered twice.
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/ingress/batch_file.hpp"
#include "actors/ingress/ingress_core.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

using namespace kvactor;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

struct counting_client final : openai::client {
  int answers = 0, status = 0;
  bool streaming = false, ended = false;
  void respond(int s, std::string body) override {
    ++answers;
    status = s;
    require(nlohmann::json::accept(body));
  }
  void begin_stream() override { streaming = true; }
  void send(std::string) override { require(streaming && !ended); }
  void end_stream() override { ended = true; }
};

// The model the ingress serves: the Llama 3 style test tokenizer, and a Llama 3 chat template.
struct served {
  std::unique_ptr<tokenizer> tok;
  std::unique_ptr<chat_template> chat;
  openai::served_model model;
  served() {
    const std::string data = std::string(KVACTOR_SOURCE_DIR) + "/tests/data/";
    auto t = load_tokenizer(data + "tokenizers/llama3_bpe");
    auto c = chat_template::load(data + "tokenizers/llama3_bpe",
                                 data + "chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja");
    if (!t || !c) throw std::runtime_error("the fuzz target's tokenizer or template is missing");
    tok = std::move(*t);
    chat = std::make_unique<chat_template>(std::move(*c));
    model.name = "tiny";
    model.tok = tok.get();
    model.chat = chat.get();
    model.eos_token_ids = {498};
    model.max_model_len = 64;
    model.vocab_size = 500;
  }
};

const served& the_model() {
  static const served s;
  return s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const openai::endpoint kinds[] = {
      openai::endpoint::completions, openai::endpoint::chat_completions, openai::endpoint::tokenize,
      openai::endpoint::detokenize};
  const auto& m = the_model();
  openai::ingress_core core(
      m.model, {4}, [] { return int64_t{0}; }, 1);
  std::string body(fuzz::text_of(data + 1, size - 1));
  auto kind = kinds[data[0] % 4];
  if (data[0] % 5 == 4) { // a batch line: its body goes to its endpoint
    const auto line = openai::parse_batch_line(body, 1);
    if (!line.request) {
      require(line.error.rfind("line 1: ", 0) == 0);
      return 0;
    }
    kind = line.request->kind;
    body = line.request->body;
  }
  auto c = std::make_shared<counting_client>();
  uint64_t key = 0;
  const auto specs = core.accept(kind, body, c, key);
  if (specs.empty()) {
    require(c->answers == 1 || (c->streaming && c->ended));
    return 0;
  }
  require(c->answers == 0);
  for (const auto& s : specs) {
    require(!s.prompt.empty());
    require(static_cast<int64_t>(s.prompt.size()) + s.max_output_tokens <= m.model.max_model_len);
    for (auto id : s.prompt)
      require(id >= 0 && id < m.model.vocab_size);
  }
  core.disconnect(key);
  require(core.in_flight() == 0);
  return 0;
}
