// libFuzzer target: config.json text through the model loader (every family's layout, at TP 1
// and 2) and, when it parses as JSON, through the decoder's config reader. Hostile configs must
// give errors, never a crash, an escaped exception or an allocation the config asks for.
#include <nlohmann/json.hpp>

#include "model/hf_decoder.hpp"
#include "model/loader.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvactor;
  const auto text = fuzz::text_of(data, size);
  for (int32_t tp : {1, 2}) {
    load_options opt;
    opt.tensor_parallel_size = tp;
    (void)load_model_layout(text, opt, tp - 1);
  }
  const auto json = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (!json.is_discarded())
    for (int32_t tp : {1, 2})
      (void)read_decoder_config(json, tp, 0);
  return 0;
}
