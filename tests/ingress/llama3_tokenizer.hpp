// The byte-level BPE tokenizer of tests/data/tokenizers/llama3_bpe (a Llama 3 style vocabulary of
// 500 tokens; <|eot_id|> is 498), loaded once for the ingress tests, and a model served on it.
#pragma once

#include <stdexcept>
#include <string>

#include "actors/ingress/ingress_core.hpp"
#include "model/tokenizer.hpp"

namespace kvactor::test {

inline const tokenizer& llama3() {
  static const auto tok = [] {
    auto t = load_tokenizer(std::string(KVACTOR_SOURCE_DIR) + "/tests/data/tokenizers/llama3_bpe");
    if (!t) throw std::runtime_error(t.err().message);
    return std::move(*t);
  }();
  return *tok;
}

inline constexpr int32_t llama3_eos = 498;

/// A model served on that tokenizer: "tiny", 64 tokens long, 500 ids, no chat template.
inline openai::served_model tiny_served_model() {
  openai::served_model m;
  m.name = "tiny";
  m.tok = &llama3();
  m.eos_token_ids = {llama3_eos};
  m.max_model_len = 64;
  m.vocab_size = 500;
  return m;
}

} // namespace kvactor::test
