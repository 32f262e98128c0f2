// `kvactor replay FILE [--until-step N] [--actor NAME] [--verify]`: rebuilds actors of a recorded
// run from its start-up messages, re-delivers the recorded stream, and (with --verify) checks
// every reply -- and every message between a rank and its builders and graph manager -- against
// the recording; the first divergence names the step, the actor, the message type and the field.
//
// Without --actor every rank is rebuilt (the driver's messages come from the trace). --actor
// replays one actor alone, the others stubbed from the trace:
//   driver             the real driver, ranks answering with their recorded replies
//   rank[N]            one rank with its children (single-rank traces)
//   cudagraph@rank[N]  the graph manager: its plan and every dispatch
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace kvactor {

struct replay_flags {
  std::string file;
  std::optional<uint64_t> until_step;
  std::string actor; // empty: all ranks
  bool verify = false;
  bool json = false; // one object (schema kvactor.replay/1) instead of the line
};

int run_replay(const replay_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
