#include "actors/metadata/actor.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "actors/metadata/digest.hpp"
#include "actors/metadata/ubatch_inputs.hpp"
#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

builder_actor::behavior_type builder(builder_actor::stateful_pointer<builder_state> self,
                                     builder_setup setup) {
  refuse_unexpected(self);
  self->state.setup = std::move(setup);
  const auto& s = self->state.setup;
  // build_attention_metadata picks builders[g][a][ubatch]; this actor serves one ubatch, the
  // entries below it are never used but keep the indexing of the shared table shape.
  for (const auto& list : s.attention_groups) {
    auto& per_group = self->state.builders.emplace_back();
    for (const auto& a : list) {
      auto& per_attn = per_group.emplace_back();
      for (int32_t u = 0; u <= s.ubatch; ++u)
        per_attn.push_back(std::make_unique<reference_builder>(a.backend));
    }
  }
  return {
      [self](const ubatch_work& work) -> caf::result<metadata_ready> {
        const auto started = std::chrono::steady_clock::now();
        auto& st = self->state;
        if (work.ubatch != st.setup.ubatch)
          return to_caf_error(make_error(errc::invalid_argument,
                                         fmt::format("ubatch_work: ubatch {} sent to builder {}",
                                                     work.ubatch, st.setup.ubatch)));
        if (work.seq != st.setup.batch->seq)
          return to_caf_error(make_error(errc::invalid_argument,
                                         fmt::format("ubatch_work: seq {} but the batch is step {}",
                                                     work.seq, st.setup.batch->seq)));
        auto inputs = slice_inputs(*st.setup.batch, work, st.setup.groups, st.slots);
        if (!inputs) return to_caf_error(inputs.err());
        auto layers = build_attention_metadata(st.setup.attention_groups, st.builders, *inputs);
        if (!layers) return to_caf_error(layers.err());
        auto& out = *st.setup.output;
        out.seq = work.seq;
        out.token_start = work.token_start;
        out.token_end = work.token_end;
        out.num_reqs = inputs->num_reqs;
        out.layers = std::move(*layers);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - started)
                            .count();
        // After the clock: the digest is the recorder's cost, not the build's.
        const uint64_t digest = st.setup.digest ? metadata_digest(out.layers) : 0;
        return metadata_ready{work.seq,           work.ubatch, inputs->num_reqs,
                              inputs->num_tokens, ns,          digest};
      },
  };
}

} // namespace kvactor
