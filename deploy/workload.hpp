// The synthetic workload of `kvactor run`: deterministic from a seed, so that a seed means the
// same requests on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "messages/errc.hpp"
#include "messages/request.hpp"

namespace kvactor {

/// The longest prompt or output a request of the synthetic workload (or `generate`) may ask for.
inline constexpr int32_t max_tokens_per_request = 1 << 24;

/// "N" or "MIN:MAX" (inclusive, in [1, max_tokens_per_request]); errors name `flag`.
expected<std::pair<int32_t, int32_t>> parse_range(const std::string& text, const char* flag);

/// "inf" (0: every request arrives at once) or a positive rate in requests per second; errors
/// name --arrival-rate.
expected<double> parse_arrival_rate(const std::string& text);

/// Prompt and output lengths uniform in their ranges, prompt tokens uniform below `vocab`,
/// Poisson arrivals at `rate` per second (0 = all at once). With `shared_prefix_len` > 0 every
/// prompt starts with one of `num_prefixes` prefixes of that many tokens, drawn uniformly per
/// request (REQUIRES: at most the shortest prompt; num_prefixes >= 1); 0 gives the workload of
/// earlier versions for the same seed, and so does everything after the prefix.
std::vector<request_spec> make_workload(int32_t requests, std::pair<int32_t, int32_t> prompt_len,
                                        std::pair<int32_t, int32_t> output_len, double rate,
                                        int32_t vocab, uint64_t seed, int32_t shared_prefix_len = 0,
                                        int32_t num_prefixes = 1);

/// Prompt tokens a prefix cache that never evicts could serve `workload` (arrival order): per
/// request, its leading full blocks of `block_size` tokens (at least its last token left to
/// compute) that an earlier prompt began with too. What --enable-prefix-caching reports as ideal.
int64_t ideal_prefix_hit_tokens(const std::vector<request_spec>& workload, int32_t block_size);

} // namespace kvactor
