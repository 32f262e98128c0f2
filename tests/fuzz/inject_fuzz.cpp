// libFuzzer target: the message file `kvactor inject` reads (the codec's MessagePack envelope, or
// JSON: an array [type, version, payload] or a record of `trace show --json`).
#include <string>

#include "deploy/inject_command.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kvactor::parse_message_file("fuzz-input", std::string(kvactor::fuzz::text_of(data, size)));
  return 0;
}
