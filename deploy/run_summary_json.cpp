// The JSON summary of `kvactor run` (schema kvactor.run/1).
#include <nlohmann/json.hpp>

#include "deploy/run_command.hpp"

namespace kvactor {

namespace {

// Every rank's start-up phases in order: seconds, what the phase allocated, the ledger's total
// after it, and on a GPU the memory the device lost since the rank started.
nlohmann::ordered_json ready_phases(const std::vector<rank_ready>& ready) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& r : ready)
    for (const auto& p : r.phases) {
      nlohmann::ordered_json e = {{"rank", r.rank},
                                  {"phase", p.phase},
                                  {"seconds", static_cast<double>(p.duration_ns) / 1e9},
                                  {"allocated_bytes", p.memory_bytes},
                                  {"ledger_bytes", p.ledger_bytes}};
      if (p.device_used_bytes >= 0) e["device_used_bytes"] = p.device_used_bytes;
      out.push_back(std::move(e));
    }
  return out;
}

// Each output token's logprob and its position's most likely tokens as [token, logprob] pairs.
nlohmann::ordered_json logprobs_json(const std::vector<token_logprobs>& lps) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& lp : lps) {
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const auto& t : lp.top)
      top.push_back({t.token, t.logprob});
    out.push_back({{"logprob", lp.logprob}, {"top", std::move(top)}});
  }
  return out;
}

} // namespace

std::string summary_json(const run_summary& s, const std::string& device, int32_t tp,
                         int32_t ubatches, double ready_s, const std::vector<rank_ready>& ready) {
  nlohmann::ordered_json j;
  j["schema"] = "kvactor.run/1";
  j["requests"] = {{"finished", s.finished}, {"failed", s.failed}, {"preempted", s.preempted}};
  j["tokens"] = {{"prompt", s.prompt_tokens}, {"generated", s.generated_tokens}};
  j["steps"] = s.steps;
  j["throughput_tok_s"] =
      s.wall_s > 0 ? static_cast<double>(s.prompt_tokens + s.generated_tokens) / s.wall_s : 0.0;
  j["prompt_throughput_tok_s"] =
      s.wall_s > 0 ? static_cast<double>(s.prompt_tokens) / s.wall_s : 0.0;
  j["generation_throughput_tok_s"] =
      s.wall_s > 0 ? static_cast<double>(s.generated_tokens) / s.wall_s : 0.0;
  j["step_ms"] = {{"p50", s.step_ms_p50}, {"p99", s.step_ms_p99}};
  j["ttft_ms"] = {{"p50", s.ttft_ms_p50}, {"p99", s.ttft_ms_p99}};
  j["tpot_ms"] = {{"p50", s.tpot_ms_p50}, {"p99", s.tpot_ms_p99}};
  j["e2e_ms"] = {{"p50", s.e2e_ms_p50}, {"p99", s.e2e_ms_p99}};
  j["kv_blocks"] = {{"total", s.kv_blocks_total},
                    {"peak_used", s.kv_blocks_peak_used},
                    {"held_at_end", s.kv_blocks_held_at_end}};
  j["prefix_cache"] = {{"hit_tokens", s.prefix_hit_tokens}};
  j["graphs"] = {{"replays", s.graph_replays}, {"eager_steps", s.eager_steps}};
  j["output_digest"] = s.output_digest;
  j["device"] = device;
  j["tensor_parallel_size"] = tp;
  j["ubatches"] = ubatches;
  j["wall_s"] = s.wall_s;
  j["ready_s"] = ready_s;
  j["ready_phases"] = ready_phases(ready);
  nlohmann::ordered_json failures = nlohmann::ordered_json::array();
  for (const auto& r : s.results)
    if (!r.finished) failures.push_back({{"request_id", r.request_id}, {"reason", r.failure}});
  j["failures"] = std::move(failures);
  // Every request's generated tokens, so that two runs (devices, TP sizes) can be compared.
  nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
  for (const auto& r : s.results) {
    outputs.push_back({{"request_id", r.request_id}, {"tokens", r.output}});
    if (!r.logprobs.empty()) outputs.back()["logprobs"] = logprobs_json(r.logprobs);
  }
  j["outputs"] = std::move(outputs);
  j["error"] =
      s.error.message; // why the run stopped early (a failed collective); empty when it did not
  return j.dump(2);
}

} // namespace kvactor
