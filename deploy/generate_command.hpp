// `kvactor generate`: one prompt through a real model, served by the same actors as `run`
// (driver, ranks, builders, KV cache), the continuation printed as text when the model directory
// has a tokenizer (tokenizer.json or tokenizer.model), as token ids otherwise, or, with --json,
// one object for scripts.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "deploy/plan_command.hpp"
#include "messages/errc.hpp"

namespace kvactor {

struct generate_flags {
  /// The engine flags `run` takes too (model directory, device, tensor-parallel size, dtypes, KV
  /// cache, graphs), checked as run checks them.
  plan_flags engine;
  std::optional<std::string> prompt; // text: encoded by the model directory's tokenizer
  std::string prompt_ids;            // "1,2,3"
  int32_t max_tokens = 16;
  float temperature = 0.0f; // 0: greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool ignore_eos = false;    // generate max_tokens whatever is sampled
  std::string stop_token_ids; // "5,9": more tokens that end the request
  bool json = false;
};

/// "1,2,3" -> ids; errors name --prompt-ids and the entry.
expected<std::vector<int32_t>> parse_prompt_ids(const std::string& text);

int run_generate(const generate_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
