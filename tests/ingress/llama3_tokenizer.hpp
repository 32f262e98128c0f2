// The byte-level BPE tokenizer of tests/data/tokenizers/llama3_bpe (a Llama 3 style vocabulary of
// 500 tokens; <|eot_id|> is 498), loaded once for the ingress tests.
#pragma once

#include <stdexcept>
#include <string>

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

} // namespace kvactor::test
