#pragma once
// Where the test fixtures live in the source tree.

#include <string>

namespace kvactor::test {

// A tiny checkpoint written by transformers (tests/data/transformers/FAMILY: config, weights,
// tokenizer, and the greedy tokens transformers generated from it).
inline std::string transformers_fixture(const std::string& family) {
  return std::string(KVACTOR_SOURCE_DIR) + "/tests/data/transformers/" + family;
}

} // namespace kvactor::test
