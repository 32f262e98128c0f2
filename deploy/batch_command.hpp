// `kvactor batch`: OpenAI's batch file, answered offline (vLLM's `run-batch`). It loads the model
// once (local ranks, run's engine flags), sends every line of the input file through the same
// ingress `kvactor serve` uses, and writes one output line per input line, as each is answered
// (so the output's order is the order of completion: match lines by custom_id, as OpenAI says).
// Nothing is lost: a line that is no request gets an error line, and at SIGINT/SIGTERM the
// requests not finished get error lines with the reason.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "deploy/plan_command.hpp"
#include "deploy/served_model.hpp"

namespace kvactor {

struct batch_flags {
  plan_flags engine;             // the engine flags `run` takes, checked as run checks them
  cluster_flags cluster;         // --nodes: the ranks on kvactor node processes
  std::string input;             // -i: the input JSONL file
  std::string output;            // -o: the output JSONL file (written as requests are answered)
  std::string served_model_name; // what lines' "model" may say (default: the directory's name)
  std::string chat_template;     // a file; empty: the model directory's
  uint64_t seed = 0;
};

int run_batch(const batch_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
