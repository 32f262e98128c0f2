// libFuzzer target: a tokenizer.json (byte-level BPE: vocabulary, merges, pre-tokenizer regexes,
// added tokens). A file that loads must then encode and decode without crashing.
#include <array>

#include "model/tokenizer.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor;
  auto tok = load_bpe_tokenizer(fuzz::as_file(data, size, "tokenizer.json"));
  if (!tok) return 0;
  (void)(*tok)->encode("Hello, world! 123 \xc3\xa9t\xc3\xa9", true);
  const std::array<int32_t, 4> ids{0, 1, 2, (*tok)->vocab_size() - 1};
  (void)(*tok)->decode(ids, false);
  return 0;
}
