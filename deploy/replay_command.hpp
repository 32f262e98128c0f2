// `kvactor replay FILE [--until-step N] [--verify]`: rebuilds the ranks of a recorded run from
// its start-up messages, re-delivers every recorded step_plan, and (with --verify) checks every
// reply against the recording; the first divergence names the step, the rank and the field.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace kvactor {

struct replay_flags {
  std::string file;
  std::optional<uint64_t> until_step;
  bool verify = false;
};

int run_replay(const replay_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
