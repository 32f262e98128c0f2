// A reference for what a kvactor-tiny rank samples, computed without the actors: the attention
// stack alone (kernels/), driven by the kernel tests' own scheduler (tests/kernels/), one request
// at a time on a fresh cache. No driver, scheduler, KV cache manager, block tables, metadata
// builders or rank sits between the prompt and the tokens, so an actor run that gives the same
// tokens got all of those right.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "actors/rank/workload.hpp"
#include "tests/kernels/stack_fixture.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {

/// The `n` tokens kvactor-tiny generates greedily after `prompt` with weights from `seed`: the
/// whole prompt in one step, then one token per step, on a bfloat16 cache of 16-token blocks as
/// the rank's KV cache plan gives it (empty and a failure if the model does not load).
inline std::vector<int32_t> tiny_reference_tokens(const std::vector<int32_t>& prompt, int32_t n,
                                                  uint64_t seed) {
  namespace k = kernels;
  auto cfg = stack_config_for(tiny_layout(), seed);
  if (!cfg) {
    ADD_FAILURE() << "kvactor-tiny stack: " << cfg.err().message;
    return {};
  }
  k::attention_stack stack(*cfg);
  constexpr int32_t block_size = 16;
  const auto blocks = static_cast<int64_t>(prompt.size() + static_cast<size_t>(n)) / block_size + 1;
  k::test::stack_cache cache(stack, blocks, block_size, k::element_type::bf16);
  k::test::block_pool pool(blocks, 1);
  k::test::sequence seq;
  seq.tokens = prompt;
  std::vector<int32_t> out;
  int32_t count = static_cast<int32_t>(prompt.size());
  while (static_cast<int32_t>(out.size()) < n) {
    const auto b = k::test::schedule({&seq}, {count}, pool, block_size);
    const auto hidden = k::test::run_step(stack, cache, b);
    const int32_t token = stack.sample(hidden.data(), {b.num_tokens() - 1})[0];
    out.push_back(token);
    seq.tokens.push_back(token);
    count = 1;
  }
  return out;
}

} // namespace kvactor::test
