// libFuzzer target: arbitrary text (invalid UTF-8 included) through the shipped test tokenizers
// (GPT-2, Llama 3 and Qwen2 byte-level BPE, a SentencePiece unigram model), and the same bytes
// read as token ids through decode. Invalid input is an error, never a crash.
#include <cstring>
#include <memory>
#include <vector>

#include "model/tokenizer.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

std::string fixture(const char* name) {
  const char* root = std::getenv("KVACTOR_SOURCE_DIR");
  return std::string(root != nullptr ? root : KVACTOR_SOURCE_DIR) + "/tests/data/tokenizers/"
         + name;
}

const std::vector<std::unique_ptr<kvactor::tokenizer>>& tokenizers() {
  static const auto all = [] {
    std::vector<std::unique_ptr<kvactor::tokenizer>> out;
    for (const char* dir : {"gpt2_bpe", "llama3_bpe", "qwen2_bpe", "spm_unigram"})
      if (auto t = kvactor::load_tokenizer(fixture(dir))) out.push_back(std::move(*t));
    if (out.size() != 4) std::abort(); // the fixtures must load, or nothing is fuzzed
    return out;
  }();
  return all;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<int32_t> ids(size / sizeof(int32_t));
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * sizeof(int32_t));
  for (const auto& tok : tokenizers()) {
    (void)tok->encode(kvactor::fuzz::text_of(data, size), size % 2 == 0);
    (void)tok->decode(ids, size % 3 == 0);
  }
  return 0;
}
