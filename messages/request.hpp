// Client <-> driver: requests in, a run summary out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/errc.hpp"

namespace kvactor {

/// How a request's next token is chosen, and which tokens end it. temperature 0 is greedy (the
/// argmax, the lowest id on ties); otherwise the logits are divided by the temperature, cut to the
/// top_k (0: all) and to the smallest set whose probability reaches top_p (1: all), and one token
/// is drawn with a generator seeded by (seed, the token's position), so a request's tokens do not
/// depend on what it is batched with.
struct sampling_params {
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  std::vector<int32_t> stop_token_ids; // a sampled one ends the request (and is kept)
  // Log-probabilities of each sampled token: -1 none; 0 the sampled token's; k > 0 also the k
  // most likely tokens (at most max_logprobs). Under the raw logits, before temperature, top-k and
  // top-p, as vLLM reports them.
  int32_t logprobs = -1;

  bool operator==(const sampling_params&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, sampling_params& x) {
  return f(caf::meta::type_name("kvactor::sampling_params"), x.temperature, x.top_k, x.top_p,
           x.seed, x.stop_token_ids, x.logprobs);
}

/// The most top alternatives a request may ask logprobs for (vLLM's default max_logprobs).
inline constexpr int32_t max_logprobs = 20;

/// One token and its log-probability.
struct token_logprob {
  int32_t token = 0;
  float logprob = 0.0f;

  bool operator==(const token_logprob&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, token_logprob& x) {
  return f(caf::meta::type_name("kvactor::token_logprob"), x.token, x.logprob);
}

/// A sampled token's log-probability and the `sampling.logprobs` most likely tokens of its
/// position (most likely first, ties by lower id); both empty where none were asked for.
struct token_logprobs {
  float logprob = 0.0f;
  std::vector<token_logprob> top;

  bool operator==(const token_logprobs&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, token_logprobs& x) {
  return f(caf::meta::type_name("kvactor::token_logprobs"), x.logprob, x.top);
}

/// Why a request ended.
enum class finish_reason : uint8_t {
  none,   // not finished (failed, or the run stopped first)
  length, // max_output_tokens generated, or the model's length reached
  stop,   // a stop token was sampled
};

std::string_view to_string(finish_reason x);

/// One generation request: up to max_output_tokens after the prompt, chosen as `sampling` says.
struct request_spec {
  uint64_t request_id = 0;
  std::vector<int32_t> prompt;
  int32_t max_output_tokens = 0;
  int64_t arrival_ns = 0;        // offset from the start of the run
  sampling_params sampling = {}; // greedy unless set

  bool operator==(const request_spec&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, request_spec& x) {
  return f(caf::meta::type_name("kvactor::request_spec"), x.request_id, x.prompt,
           x.max_output_tokens, x.arrival_ns, x.sampling);
}

/// What happened to one request.
struct request_result {
  uint64_t request_id = 0;
  bool finished = false; // false: failed
  std::vector<int32_t> output;
  int32_t num_preemptions = 0;
  std::string failure;
  finish_reason reason = finish_reason::none;
  std::vector<token_logprobs> logprobs; // [output] when sampling.logprobs >= 0, else empty

  bool operator==(const request_result&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, request_result& x) {
  return f(caf::meta::type_name("kvactor::request_result"), x.request_id, x.finished, x.output,
           x.num_preemptions, x.failure, x.reason, x.logprobs);
}

/// What happened to one request since its last update, for a client that streams it (serving):
/// the tokens sampled, and with the last update how the request ended.
struct request_update {
  uint64_t request_id = 0;
  std::vector<int32_t> tokens;
  std::vector<token_logprobs> logprobs; // [tokens] when sampling.logprobs >= 0
  bool done = false;                    // the request's last update
  bool finished = false;                // done: served to its end; else failed with `failure`
  finish_reason reason = finish_reason::none;
  std::string failure;

  bool operator==(const request_update&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, request_update& x) {
  return f(caf::meta::type_name("kvactor::request_update"), x.request_id, x.tokens, x.logprobs,
           x.done, x.finished, x.reason, x.failure);
}

/// The updates of one driver event (a step applied, a request failed), in request order.
struct request_updates {
  std::vector<request_update> updates;

  bool operator==(const request_updates&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, request_updates& x) {
  return f(caf::meta::type_name("kvactor::request_updates"), x.updates);
}

/// Ends a request now (its client went away, or a stop string matched its text): it fails with
/// `reason` and its KV blocks are free before the next step. A no-op for a request already done.
struct request_abort {
  uint64_t request_id = 0;
  std::string reason;

  bool operator==(const request_abort&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, request_abort& x) {
  return f(caf::meta::type_name("kvactor::request_abort"), x.request_id, x.reason);
}

/// Asks the driver for a request's result once it has finished or failed: `kvactor inject --wait`
/// reads what a request it injected produced. Answered at once for a request already done.
struct request_await {
  uint64_t request_id = 0;

  bool operator==(const request_await&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, request_await& x) {
  return f(caf::meta::type_name("kvactor::request_await"), x.request_id);
}

/// The end of a run (schema kvactor.run/1 in JSON).
struct run_summary {
  int64_t finished = 0;
  int64_t failed = 0;
  int64_t preempted = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t steps = 0;
  double wall_s = 0.0;
  double step_ms_p50 = 0.0;
  double step_ms_p99 = 0.0;
  double ttft_ms_p50 = 0.0, ttft_ms_p99 = 0.0; // arrival to first token
  double tpot_ms_p50 = 0.0, tpot_ms_p99 = 0.0; // per output token after the first
  double e2e_ms_p50 = 0.0, e2e_ms_p99 = 0.0;   // arrival to last token
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_peak_used = 0;
  int64_t kv_blocks_held_at_end = 0; // held by requests when the run ended: 0 unless one leaked
  int64_t graph_replays = 0;
  int64_t eager_steps = 0;
  int64_t prefix_hit_tokens = 0; // prompt tokens admissions took from the prefix cache
  std::string output_digest;
  std::vector<request_result> results; // request order
  kvactor::error error; // why the run stopped before serving everything; no_error when it did not

  bool operator==(const run_summary&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, run_summary& x) {
  return f(caf::meta::type_name("kvactor::run_summary"), x.finished, x.failed, x.preempted,
           x.prompt_tokens, x.generated_tokens, x.steps, x.wall_s, x.step_ms_p50, x.step_ms_p99,
           x.ttft_ms_p50, x.ttft_ms_p99, x.tpot_ms_p50, x.tpot_ms_p99, x.e2e_ms_p50, x.e2e_ms_p99,
           x.kv_blocks_total, x.kv_blocks_peak_used, x.kv_blocks_held_at_end, x.graph_replays,
           x.eager_steps, x.prefix_hit_tokens, x.output_digest, x.results, x.error);
}

} // namespace kvactor
