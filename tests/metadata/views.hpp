// Test helpers for the non-owning views of common_attention_metadata and attention_inputs.
#pragma once

#include <span>
#include <vector>

namespace kvactor::test {

/// The elements a view shows, as a vector (so gtest can compare and print them).
template <class T>
std::vector<T> vec(std::span<const T> xs) {
  return std::vector<T>(xs.begin(), xs.end());
}

} // namespace kvactor::test
