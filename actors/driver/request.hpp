// One request as the driver's scheduler sees it. Its tokens are prompt + output: after a
// preemption by recompute the output so far is re-fed as if it were prompt.
//
//   waiting --admit--> running --output complete--> finished
//      ^                  |
//      +----preempt-------+---fail_request, or it can never fit---> failed
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "messages/request.hpp"

namespace kvactor {

struct request_state {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::vector<token_logprobs> logprobs; // [output] when sampling.logprobs >= 0
  int32_t max_output_tokens = 0;
  int32_t num_computed_tokens = 0; // tokens whose KV is in the cache (or will be, once the
                                   // last plan runs)
  enum class status { waiting, running, finished, failed } st = status::waiting;
  int32_t num_preemptions = 0;
  std::string failure; // why it failed; empty otherwise
  sampling_params sampling;
  finish_reason reason = finish_reason::none; // once finished
};

/// prompt + output: every token known so far.
inline int32_t num_tokens(const request_state& r) {
  return static_cast<int32_t>(r.prompt.size() + r.output.size());
}

/// Known tokens not yet in the cache.
inline int32_t num_uncomputed_tokens(const request_state& r) {
  return num_tokens(r) - r.num_computed_tokens;
}

/// The token at `pos` of prompt + output. REQUIRES: 0 <= pos < num_tokens(r).
inline int32_t token_at(const request_state& r, int32_t pos) {
  auto p = static_cast<size_t>(pos);
  return p < r.prompt.size() ? r.prompt[p] : r.output[p - r.prompt.size()];
}

/// Tokens [from, from + n) of prompt + output. REQUIRES: the range lies in [0, num_tokens(r)).
inline std::vector<int32_t> tokens_between(const request_state& r, int32_t from, int32_t n) {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    out.push_back(token_at(r, from + i));
  return out;
}

/// Finished or failed: it will never be scheduled again.
inline bool is_done(const request_state& r) {
  return r.st == request_state::status::finished || r.st == request_state::status::failed;
}

inline std::string_view to_string(request_state::status s) {
  switch (s) {
  case request_state::status::waiting: return "waiting";
  case request_state::status::running: return "running";
  case request_state::status::finished: return "finished";
  case request_state::status::failed: return "failed";
  }
  return "unknown";
}

} // namespace kvactor
