// A recorded run, regrouped for replay: per rank its start-up and its steps, each step with the
// reply and the messages the rank exchanged with its builders and graph manager meanwhile.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "messages/cudagraph.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"
#include "messages/trace.hpp"

namespace kvactor {

struct recorded_step {
  uint64_t record = 0; // index of the step_plan record
  step_plan plan;
  std::optional<step_done> done;
  std::optional<step_rejected> rejected;
  std::vector<trace_record> inner; // rank <-> builder[u] / cudagraph, in recording order
};

struct recorded_rank {
  rank_config config;
  rank_plan plan;
  rank_ready ready;
  std::optional<cudagraph_request> graph_request;
  std::optional<cudagraph_plan> graph_plan;
  std::vector<cudagraph_captured> startup_captures; // graphs captured before the first step
  std::vector<recorded_step> steps;
};

struct recorded_run {
  std::vector<recorded_rank> ranks;
  std::vector<request_spec> requests; // client -> driver
  std::optional<run_summary> summary;
};

/// "rank[3]" and "builder[0]@rank[3]" -> 3 (the rank that owns the actor); -1 otherwise.
int owner_rank(const std::string& actor);

/// Regroups the records; errors name the record (an undecodable payload, a reply without its
/// step) or the rank whose start-up is missing.
expected<recorded_run> read_recorded_run(const std::vector<trace_record>& records);

} // namespace kvactor
