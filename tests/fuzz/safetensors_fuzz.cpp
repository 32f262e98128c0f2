// libFuzzer target: a .safetensors file (8-byte header length, JSON header, data). Every header
// is checked before a byte of data is trusted: bad files are errors that name what is wrong.
#include "model/safetensors.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor;
  auto file = safetensors_file::open(fuzz::as_file(data, size, "model.safetensors"));
  if (file)
    for (const auto& [name, t] : (*file)->tensors())
      (void)t.elements();
  return 0;
}
