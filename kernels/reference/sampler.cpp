#include "kvactor/kernels/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kvactor/kernels/check.h"

namespace kvactor::kernels {

namespace {

int32_t argmax(const float* logits, int32_t vocab) {
  return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
}

} // namespace

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double keyed_uniform(uint64_t seed, uint64_t counter) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ counter);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int32_t sample_token(const float* logits, int32_t vocab, const sampling_config& cfg,
                     uint64_t position) {
  KVACTOR_CHECK(vocab > 0, "sample: vocab: ", vocab, " must be > 0");
  KVACTOR_CHECK(cfg.temperature >= 0.0f && std::isfinite(cfg.temperature),
                "sample: temperature: ", cfg.temperature, " must be >= 0");
  KVACTOR_CHECK(cfg.top_k >= 0, "sample: top_k: ", cfg.top_k, " must be >= 0");
  KVACTOR_CHECK(cfg.top_p > 0.0f && cfg.top_p <= 1.0f, "sample: top_p: ", cfg.top_p,
                " must be in (0, 1]");
  if (cfg.temperature == 0.0f) return argmax(logits, vocab);
  // Candidates by probability, highest first; ties by lower id (stable).
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const size_t k =
      cfg.top_k > 0 ? std::min<size_t>(static_cast<size_t>(cfg.top_k), ids.size()) : ids.size();
  std::vector<double> p(k);
  const double top = logits[ids[0]];
  double sum = 0;
  for (size_t i = 0; i < k; ++i)
    sum += p[i] = std::exp((logits[ids[i]] - top) / cfg.temperature);
  // Top-p: the shortest prefix whose probability reaches top_p.
  size_t keep = k;
  double mass = 0;
  for (size_t i = 0; i < k; ++i) {
    mass += p[i] / sum;
    if (mass >= cfg.top_p) {
      keep = i + 1;
      break;
    }
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i)
    kept += p[i];
  const double u = keyed_uniform(cfg.seed, position) * kept;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

row_logprobs logprobs_of(const float* logits, int32_t vocab, int32_t chosen, int32_t top) {
  KVACTOR_CHECK(vocab > 0, "logprobs: vocab: ", vocab, " must be > 0");
  KVACTOR_CHECK(chosen >= 0 && chosen < vocab, "logprobs: chosen: ", chosen, " outside [0, ", vocab,
                ")");
  KVACTOR_CHECK(top >= 0, "logprobs: top: ", top, " must be >= 0");
  const float peak = logits[argmax(logits, vocab)];
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i)
    sum += std::exp(static_cast<double>(logits[i]) - peak);
  const double log_norm = peak + std::log(sum);
  row_logprobs out;
  out.chosen = static_cast<float>(logits[chosen] - log_norm);
  const auto k = static_cast<size_t>(std::min(top, vocab));
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                    });
  for (size_t i = 0; i < k; ++i) {
    out.top_ids.push_back(ids[i]);
    out.top_values.push_back(static_cast<float>(logits[ids[i]] - log_norm));
  }
  return out;
}

sampled_rows sample_host_rows(const float* logits, int32_t vocab,
                              const std::vector<sampling_config>& cfgs,
                              const std::vector<uint64_t>& keys, size_t rows) {
  sampled_rows out;
  const bool any_logprobs = std::any_of(cfgs.begin(), cfgs.end(),
                                        [](const sampling_config& c) { return c.logprobs >= 0; });
  if (any_logprobs) out.logprobs.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    const auto cfg = r < cfgs.size() ? cfgs[r] : sampling_config{};
    const float* row = logits + r * static_cast<size_t>(vocab);
    out.tokens.push_back(sample_token(row, vocab, cfg, r < keys.size() ? keys[r] : 0));
    if (cfg.logprobs >= 0)
      out.logprobs[r] = logprobs_of(row, vocab, out.tokens.back(), cfg.logprobs);
  }
  return out;
}

} // namespace kvactor::kernels
