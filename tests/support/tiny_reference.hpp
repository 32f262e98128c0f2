// A reference for what a kvactor-tiny rank samples, computed without the actors: the CPU decoder
// alone (kernels/), with kvactor-tiny's generated weights, one request at a time on a fresh
// cache. No driver, scheduler, KV cache manager, block tables, metadata builders or rank sits
// between the prompt and the tokens, so an actor run that gives the same tokens got all of those
// right.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/hf_decoder.hpp"
#include "model/loader.hpp"
#include "tests/model/decoder_runner.hpp"

namespace kvactor::test {

/// The `n` tokens kvactor-tiny generates greedily after `prompt` with weights from `seed`: the
/// whole prompt in one step, then one token per step, on a bfloat16 cache of 16-token blocks as
/// the rank's KV cache plan gives it (empty and a failure if the model does not load).
inline std::vector<int32_t> tiny_reference_tokens(const std::vector<int32_t>& prompt, int32_t n,
                                                  uint64_t seed) {
  auto path = resolve_model_path("kvactor-tiny");
  auto config = path ? read_config_json(*path) : expected<nlohmann::json>(path.err());
  auto model =
      config ? synthetic_hf_decoder(*config, 1, 0, seed) : expected<hf_decoder_model>(config.err());
  if (!model) {
    ADD_FAILURE() << "kvactor-tiny decoder: " << model.err().message;
    return {};
  }
  const kernels::decoder d(model->config.spec, std::move(model->weights));
  decoder_runner run(d, 1, static_cast<int32_t>(prompt.size()) + n, kernels::element_type::bf16);
  return run.greedy(0, prompt, n);
}

} // namespace kvactor::test
