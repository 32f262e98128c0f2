#include "deploy/message_diff.hpp"

#include <map>
#include <set>

#include <fmt/format.h>

namespace kvactor {

namespace {

using detail::msgpack_value;
using kind = msgpack_value::kind;

// Field names by schema path (inspect() order). A path ending in "[]" names the elements of a
// list; lists are marked so that their arrays are indexed rather than named.
const std::map<std::string, std::vector<std::string>>& struct_fields() {
  static const std::map<std::string, std::vector<std::string>> names{
      {"step_plan",
       {"seq", "epoch", "new_requests", "finished_requests", "block_updates", "scheduled",
        "num_ubatches"}},
      {"step_plan.new_requests[]",
       {"request_id", "prompt_len", "max_output_tokens", "sampling", "num_cached_tokens"}},
      {"step_plan.block_updates[]", {"request_id", "group_id", "start", "block_ids"}},
      {"step_plan.scheduled[]", {"request_id", "num_computed_tokens", "token_ids", "sample"}},
      {"step_done", {"seq", "epoch", "rank", "sampled", "timing", "executed"}},
      {"step_done.sampled[]", {"request_id", "token", "logprobs"}},
      {"step_done.sampled[].logprobs", {"logprob", "top"}},
      {"step_done.sampled[].logprobs.top[]", {"token", "logprob"}},
      {"step_done.executed",
       {"mode", "num_tokens", "num_reqs", "uniform_token_count", "max_query_len",
        "num_active_loras", "exact_num_tokens", "num_ubatches"}},
      {"batch_descriptor",
       {"mode", "num_tokens", "num_reqs", "uniform_token_count", "max_query_len",
        "num_active_loras", "exact_num_tokens", "num_ubatches"}},
      {"step_rejected", {"seq", "rank", "reason", "request_ids"}},
      {"step_rejected.reason", {"code", "message"}},
      {"ubatch_work", {"seq", "ubatch", "token_start", "token_end", "req_start", "req_end"}},
      {"metadata_ready", {"seq", "ubatch", "num_reqs", "num_tokens", "build_ns", "digest"}},
      {"rank_config",
       {"rank",
        "tensor_parallel_size",
        "model",
        "dtype",
        "kv_cache_dtype",
        "device",
        "attention_backend",
        "block_size",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "kv_cache_memory",
        "num_gpu_blocks_override",
        "cudagraph",
        "cudagraph_capture_sizes",
        "cudagraph_lazy",
        "cudagraph_memory",
        "num_ubatches",
        "seed",
        "executor",
        "enable_prefix_caching"}},
      {"cudagraph_captured", {"graph", "bytes", "duration_ns", "error"}},
      {"rank_plan", {"rank", "kv", "backends", "phases"}},
      {"rank_ready", {"rank", "num_blocks", "kv_cache_bytes", "graphs", "phases", "vocab_size"}},
      {"cudagraph_plan",
       {"requested", "mode", "support", "uniform_decode_query_len", "capture_sizes", "full_graphs",
        "piecewise_graphs", "notes"}},
      {"run_summary",
       {"finished",
        "failed",
        "preempted",
        "prompt_tokens",
        "generated_tokens",
        "steps",
        "wall_s",
        "step_ms_p50",
        "step_ms_p99",
        "ttft_ms_p50",
        "ttft_ms_p99",
        "tpot_ms_p50",
        "tpot_ms_p99",
        "e2e_ms_p50",
        "e2e_ms_p99",
        "kv_blocks_total",
        "kv_blocks_peak_used",
        "graph_replays",
        "eager_steps",
        "prefix_hit_tokens",
        "output_digest",
        "results",
        "error"}},
      {"run_summary.results[]",
       {"request_id", "finished", "output", "num_preemptions", "failure", "reason"}},
  };
  return names;
}

const std::set<std::string>& lists() {
  static const std::set<std::string> xs{
      "step_plan.new_requests", "step_plan.block_updates", "step_plan.scheduled",
      "step_done.sampled",      "run_summary.results",
  };
  return xs;
}

// Wall-clock measurements differ on every run by nature.
const std::set<std::string>& ignored() {
  static const std::set<std::string> xs{
      "step_done.timing",        "metadata_ready.build_ns", "rank_plan.phases",
      "rank_ready.phases",       "run_summary.wall_s",      "run_summary.step_ms_p50",
      "run_summary.step_ms_p99", "run_summary.ttft_ms_p50", "run_summary.ttft_ms_p99",
      "run_summary.tpot_ms_p50", "run_summary.tpot_ms_p99", "run_summary.e2e_ms_p50",
      "run_summary.e2e_ms_p99",
  };
  return xs;
}

std::string diff(msgpack_value a, msgpack_value b, const std::string& key,
                 const std::string& shown) {
  if (ignored().count(key) > 0) return {};
  if (a.type() != b.type() || a.type() != kind::array)
    return a.describe() == b.describe()
               ? std::string{}
               : fmt::format("{}: recorded {}, replayed {}", shown, a.describe(), b.describe());
  if (a.size() != b.size())
    return fmt::format("{}: recorded {} elements, replayed {}", shown, a.size(), b.size());
  const auto& names = struct_fields();
  auto fields = names.find(key);
  const bool is_list = lists().count(key) > 0 || fields == names.end();
  for (size_t i = 0; i < a.size(); ++i) {
    std::string child_key, child_shown;
    if (is_list) {
      child_key = lists().count(key) > 0 ? key + "[]" : key;
      child_shown = fmt::format("{}[{}]", shown, i);
    } else {
      const auto& name = i < fields->second.size() ? fields->second[i] : fmt::format("field {}", i);
      child_key = key + "." + name;
      child_shown = shown + "." + name;
    }
    if (auto d = diff(a[i], b[i], child_key, child_shown); !d.empty()) return d;
  }
  return {};
}

} // namespace

std::string diff_envelopes(const std::vector<char>& recorded, const std::vector<char>& replayed) {
  auto a = detail::msgpack_document::parse(recorded.data(), recorded.size());
  auto b = detail::msgpack_document::parse(replayed.data(), replayed.size());
  if (!a || !b) return "the message cannot be decoded";
  auto ra = a->root(), rb = b->root();
  if (ra.type() != kind::array || ra.size() != 3 || rb.type() != kind::array || rb.size() != 3)
    return "not a message envelope";
  if (ra[0].describe() != rb[0].describe())
    return fmt::format("type: recorded {}, replayed {}", ra[0].describe(), rb[0].describe());
  auto type = std::string{ra[0].string()};
  auto name = type.substr(type.rfind(':') + 1);
  return diff(ra[2], rb[2], name, name);
}

} // namespace kvactor
