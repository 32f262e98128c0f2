#include "actors/rank/step_slicing.hpp"

#include "actors/metadata/ubatch.hpp"

namespace kvactor {

namespace {

std::vector<int32_t> tokens_per_request(const step_batch& b) {
  std::vector<int32_t> counts;
  for (size_t r = 0; r < static_cast<size_t>(b.num_reqs()); ++r)
    counts.push_back(b.query_start_loc[r + 1] - b.query_start_loc[r]);
  return counts;
}

} // namespace

std::vector<ubatch_work> slice_step(const step_batch& b, uint64_t seq, int32_t requested_ubatches,
                                    size_t num_builders) {
  std::vector<ubatch_work> work;
  if (requested_ubatches == 2 && num_builders >= 2 && b.num_tokens() >= 2)
    if (auto slices = make_ubatch_slices(tokens_per_request(b), b.num_tokens(), b.num_reqs(), 2))
      for (size_t u = 0; u < slices->slices.size(); ++u) {
        const auto& s = slices->slices[u];
        work.push_back(
            {seq, static_cast<int32_t>(u), s.token_start, s.token_end, s.req_start, s.req_end});
      }
  if (work.empty()) work.push_back({seq, 0, 0, b.num_tokens(), 0, b.num_reqs()});
  return work;
}

int32_t uniform_decode(const step_batch& b) {
  return b.max_query_len == 1 && b.num_reqs() > 0 && b.num_tokens() == b.num_reqs() ? 1 : 0;
}

batch_descriptor eager_step(const step_batch& b) {
  return {cudagraph_mode::none, b.num_tokens(), b.num_reqs(), 0, 0, 0, false, 1};
}

} // namespace kvactor
