// `kvactor plan`: flags as typed by the user, turned into a plan_request and a report.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "actors/driver/deployment_plan.hpp"
#include "messages/engine_config.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// The flags of `kvactor plan`, as strings where kvactor (not the parser) checks the value, so
/// that errors name the flag and the value the same way everywhere.
/// The engine settings bind straight into their groups (engine_config.hpp).
struct plan_flags : parallel_settings, dtype_settings, cache_settings, scheduler_limits {
  std::string model;
  int32_t num_speculative_tokens = 0;
  std::string kv_cache_memory;
  std::string gpu_memory;
  double gpu_memory_utilization = 0.9;
  std::string weights_memory;
  std::string cudagraph_mode = "full_and_piecewise";
  std::string cudagraph_capture_sizes_text; // --cudagraph-capture-sizes as typed
  std::string device = "cuda";
  std::string attention_backend = "auto";
  std::string kv_cache_layout = "LBHNC";
  bool disable_hybrid_kv_cache_manager = false;
  bool allow_chunked_local_attn_with_hybrid_kv_cache = false;
  bool kv_sharing_fast_prefill = false;
  bool json = false;
};

/// Checks and converts the string-valued flags.
/// "--cudagraph-capture-sizes" text: comma-separated integers (checked further by the planner).
expected<std::vector<int32_t>> parse_capture_sizes(const std::string& text);

/// The engine settings `plan` and `run` share, against their ranges (messages/limits.hpp), before
/// any file is read: each error names the flag, the value and the rule.
status check_engine_flags(const plan_flags& flags);

expected<plan_request> to_plan_request(const plan_flags& flags);

/// Plans and prints (JSON or the human report). Errors: exit_bad_input, one line on `err`
/// naming the flag or field and the value (with --json also {"error": ...} on `out`).
int run_plan(const plan_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
