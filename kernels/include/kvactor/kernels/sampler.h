// Choosing the next token from a row of logits: greedy, or a draw after temperature, top-k and
// top-p, from a generator keyed by (seed, position) so that the draw never depends on the batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvactor::kernels {

struct sampling_config {
  float temperature = 0.0f; // 0: greedy
  int32_t top_k = 0;        // 0: the whole vocabulary
  float top_p = 1.0f;       // 1: no cut
  uint64_t seed = 0;
  int32_t logprobs = -1; // -1: none; else the chosen token's and this many of the most likely
};

/// A row's log-probabilities under its raw logits (log_softmax before temperature, top-k and
/// top-p, as vLLM reports them): the chosen token's, and the `top` most likely tokens, most
/// likely first, ties by lower id.
struct row_logprobs {
  float chosen = 0.0f;
  std::vector<int32_t> top_ids;
  std::vector<float> top_values;
};

/// What a step sampled: one token per row, and each row's logprobs (empty where its
/// sampling_config.logprobs is -1).
struct sampled_rows {
  std::vector<int32_t> tokens;
  std::vector<row_logprobs> logprobs; // [rows], or empty when no row asked
};

/// splitmix64's finaliser: a well-mixed 64-bit value from any 64-bit input.
uint64_t splitmix64(uint64_t x);

/// A uniform double in [0, 1) from (seed, counter): splitmix64 over both, 53 bits.
double keyed_uniform(uint64_t seed, uint64_t counter);

/// The token for one row of `vocab` logits. Greedy: the argmax, the lowest id on ties. Otherwise
/// softmax(logits / temperature) restricted to the top_k most likely tokens and then to the
/// smallest prefix (by probability, ties by lower id) whose mass reaches top_p, renormalised, and
/// the token whose cumulative probability first exceeds keyed_uniform(seed, position).
/// Throws std::invalid_argument for a negative temperature or top_k, or top_p outside (0, 1].
int32_t sample_token(const float* logits, int32_t vocab, const sampling_config& cfg,
                     uint64_t position);

/// The logprobs of one row of `vocab` logits for the `chosen` token and the `top` most likely
/// (top clipped to vocab). Sums in double, so that a 150k vocabulary loses no precision.
/// Throws std::invalid_argument for vocab <= 0, chosen outside [0, vocab) or top < 0.
row_logprobs logprobs_of(const float* logits, int32_t vocab, int32_t chosen, int32_t top);

/// Samples every row of `logits` ([rows, vocab]) as cfgs[r] says with draw key keys[r], with
/// the logprobs of the rows that ask for them.
sampled_rows sample_host_rows(const float* logits, int32_t vocab,
                              const std::vector<sampling_config>& cfgs,
                              const std::vector<uint64_t>& keys, size_t rows);

} // namespace kvactor::kernels
