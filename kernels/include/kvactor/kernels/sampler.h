// Choosing the next token from a row of logits: greedy, or a draw after temperature, top-k and
// top-p, from a generator keyed by (seed, position) so that the draw never depends on the batch.
#pragma once

#include <cstdint>

namespace kvactor::kernels {

struct sampling_config {
  float temperature = 0.0f; // 0: greedy
  int32_t top_k = 0;        // 0: the whole vocabulary
  float top_p = 1.0f;       // 1: no cut
  uint64_t seed = 0;
};

/// A uniform double in [0, 1) from (seed, counter): splitmix64 over both, 53 bits.
double keyed_uniform(uint64_t seed, uint64_t counter);

/// The token for one row of `vocab` logits. Greedy: the argmax, the lowest id on ties. Otherwise
/// softmax(logits / temperature) restricted to the top_k most likely tokens and then to the
/// smallest prefix (by probability, ties by lower id) whose mass reaches top_p, renormalised, and
/// the token whose cumulative probability first exceeds keyed_uniform(seed, position).
/// Throws std::invalid_argument for a negative temperature or top_k, or top_p outside (0, 1].
int32_t sample_token(const float* logits, int32_t vocab, const sampling_config& cfg,
                     uint64_t position);

} // namespace kvactor::kernels
