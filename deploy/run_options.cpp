#include "deploy/run_options.hpp"

#include <cmath>
#include <filesystem>
#include <set>

#include <unistd.h>

#include <fmt/format.h>

#include "actors/cudagraph/capture_sizes.hpp"
#include "actors/driver/kv_budget.hpp"
#include "actors/node/node_core.hpp"
#include "deploy/lists.hpp"
#include "deploy/plan_command.hpp"
#include "deploy/tp_flags.hpp"
#include "deploy/workload.hpp"
#include "messages/byte_size.hpp"
#include "messages/limits.hpp"

namespace kvactor {

namespace {

inline constexpr const char* default_model = "kvactor-tiny";
// Every request of the workload is generated up front and kept for the summary.
inline constexpr int32_t max_requests = 1'000'000;

error bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// --nodes: each HOST:PORT well formed, none twice.
status check_node_list(const std::string& nodes) {
  std::set<std::pair<std::string, uint16_t>> seen;
  for (const auto& a : split_commas(nodes)) {
    auto hp = parse_host_port(a, "--nodes");
    if (!hp) return hp.err();
    if (!seen.insert(*hp).second)
      return bad(fmt::format("--nodes: {} is given twice (the same node twice; list each node "
                             "once, with --cpu-ranks or --gpus for its slots)",
                             a));
  }
  return ok();
}

// Flags a cluster run does not take, and the ones only a cluster run takes.
status check_mode_flags(const run_flags& f, bool cluster) {
  if (cluster) {
    if (f.tp.communicator != "auto")
      return bad(fmt::format("--communicator {}: cluster ranks meet through the nodes' transport "
                             "(sockets between CPU nodes, NCCL between GPU nodes)",
                             f.tp.communicator));
    if (!f.tp.debug_stall.empty())
      return bad("--debug-stall: a local fault injection; not for --nodes");
    if (!f.tp.debug_fail_capture.empty())
      return bad("--debug-fail-capture: a local fault injection; not for --nodes");
    if (f.inject_port) return bad("--inject-port: not with --nodes (yet)");
    if (!f.chaos.kill.empty() || !f.chaos.stall.empty())
      return bad("--chaos-kill/--chaos-stall: local fault injections; not for --nodes (kill a "
                 "node process instead)");
  }
  if (!f.record.empty()
      && (!f.chaos.chaos.empty() || !f.chaos.stall.empty() || !f.chaos.kill.empty()))
    return bad(fmt::format("--record with {}: lost, repeated and late messages, and a rank that "
                           "stops answering or exits, are timing a replay cannot reproduce, so "
                           "the trace would not replay; record without fault injection",
                           !f.chaos.chaos.empty()   ? "--chaos"
                           : !f.chaos.stall.empty() ? "--chaos-stall"
                                                    : "--chaos-kill"));
  if (f.load_format != "auto" && f.load_format != "synthetic")
    return bad(fmt::format("--load-format: unknown value '{}' (expected auto or synthetic)",
                           f.load_format));
  if (f.restart_policy != "none" && f.restart_policy != "rebuild")
    return bad(fmt::format("--restart-policy: unknown value '{}' (expected none or rebuild)",
                           f.restart_policy));
  if (f.restart_policy == "rebuild" && !cluster)
    return bad("--restart-policy rebuild: only with --nodes (a local run has no node to wait for)");
  if (f.step_path != "channel" && f.step_path != "middleman")
    return bad(fmt::format("--step-path: unknown value '{}' (expected channel or middleman)",
                           f.step_path));
  if (f.step_path != "channel" && !cluster)
    return bad("--step-path: only with --nodes (a local run's steps stay in its process)");
  if (f.step_spin_us != 0 && !cluster)
    return bad("--step-spin-us: only with --nodes (a local run has no step channel)");
  if (auto ok = check_step_spin(f.step_spin_us); !ok) return ok;
  if (!std::isfinite(f.stats_interval_s) || f.stats_interval_s < 0)
    return bad(fmt::format("--stats-interval: {} is not a number of seconds >= 0 (0: no stats "
                           "lines)",
                           f.stats_interval_s));
  if (!(f.restart_wait_s > 0) || !std::isfinite(f.restart_wait_s) || f.restart_wait_s > 86'400)
    return bad(fmt::format("--restart-wait: {} is outside (0, 86400] seconds", f.restart_wait_s));
  if (cluster)
    if (auto ok = check_node_list(f.nodes); !ok) return ok;
  const tls_files tls{f.tls_cert, f.tls_key, f.tls_ca};
  if (tls.enabled() && !cluster) return bad("--tls-cert/--tls-key/--tls-ca: only with --nodes");
  return check_tls(tls);
}

status check_sizes(const run_flags& f) {
  const auto& p = f.plan;
  if (auto ok = check_engine_flags(p); !ok) return ok;
  if (!p.gpu_memory.empty() || !p.weights_memory.empty())
    return bad("--gpu-memory / --weights-memory: a run measures its GPU (or sizes a CPU run with "
               "--kv-cache-memory); they are `kvactor plan` flags");
  if (p.num_speculative_tokens != 0)
    return bad(fmt::format("--num-speculative-tokens: {}: a run has no draft model; the flag "
                           "sizes the decode query of `kvactor plan` only",
                           p.num_speculative_tokens));
  if (auto ok = check_setting(limits::num_ubatches, f.ubatches, named_as::flag); !ok) return ok;
  if (f.requests < 0 || f.requests > max_requests)
    return bad(fmt::format("--requests: {} is outside [0, {}] (requests in the synthetic "
                           "workload)",
                           f.requests, max_requests));
  if (f.logprobs && (*f.logprobs < 0 || *f.logprobs > max_logprobs))
    return bad(fmt::format("--logprobs: {} is outside [0, {}]", *f.logprobs, max_logprobs));
  return ok();
}

status read_workload_flags(const run_flags& f, run_options& o) {
  auto prompt = parse_range(f.prompt_len, "--prompt-len");
  if (!prompt) return prompt.err();
  auto output = parse_range(f.output_len, "--output-len");
  if (!output) return output.err();
  auto rate = parse_arrival_rate(f.arrival_rate);
  if (!rate) return rate.err();
  if (f.shared_prefix_len < 0 || f.shared_prefix_len > prompt->first)
    return bad(fmt::format("--shared-prefix-len: {} is outside [0, {}] (the shortest prompt of "
                           "--prompt-len)",
                           f.shared_prefix_len, prompt->first));
  if (f.num_shared_prefixes < 1)
    return bad(fmt::format("--num-shared-prefixes: {} is not positive", f.num_shared_prefixes));
  if (f.num_shared_prefixes > 1 && f.shared_prefix_len == 0)
    return bad(
        fmt::format("--num-shared-prefixes: {} prefixes of no tokens (set --shared-prefix-len)",
                    f.num_shared_prefixes));
  o.prompt_len = *prompt;
  o.output_len = *output;
  o.arrival_rate = *rate;
  return ok();
}

status read_graph_flags(const run_flags& f, run_options& o) {
  auto mode = parse_cudagraph_mode(f.plan.cudagraph_mode);
  if (!mode) return mode.err();
  o.cudagraph = *mode;
  if (f.cudagraph_capture != "startup" && f.cudagraph_capture != "lazy")
    return bad(fmt::format("--cudagraph-capture: unknown value '{}' (expected startup or lazy)",
                           f.cudagraph_capture));
  o.cudagraph_lazy = f.cudagraph_capture == "lazy";
  auto memory = parse_byte_size(f.cudagraph_memory_text, "--cudagraph-memory");
  if (!memory) return memory.err();
  o.cudagraph_memory = *memory;
  if (f.plan.cudagraph_capture_sizes_text.empty()) return ok();
  auto sizes = parse_capture_sizes(f.plan.cudagraph_capture_sizes_text);
  if (!sizes) return sizes.err();
  if (auto normalized = normalize_capture_sizes(*sizes, f.plan.max_num_batched_tokens); !normalized)
    return normalized.err();
  o.cudagraph_capture_sizes = *sizes;
  return ok();
}

// A file the run writes at its end: refused now if it could not be written then.
status check_writable(const std::string& path, std::string_view flag) {
  if (path.empty()) return ok();
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file{path};
  if (fs::is_directory(file, ec)) return bad(fmt::format("{}: '{}' is a directory", flag, path));
  if (fs::exists(file, ec)) {
    if (::access(path.c_str(), W_OK) != 0)
      return bad(fmt::format("{}: cannot write '{}' (not writable)", flag, path));
    return ok();
  }
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path{"."};
  if (!fs::is_directory(dir, ec))
    return bad(fmt::format("{}: cannot write '{}' (no directory {})", flag, path, dir.string()));
  if (::access(dir.c_str(), W_OK) != 0)
    return bad(fmt::format("{}: cannot write '{}' ({} is not writable)", flag, path, dir.string()));
  return ok();
}

} // namespace

expected<run_options> check_run_flags(const run_flags& f) {
  run_options o;
  o.model = f.plan.model.empty() ? default_model : f.plan.model;
  o.cluster = !f.nodes.empty();
  if (f.plan.device != "auto") {
    auto device = parse_device(f.plan.device);
    if (!device)
      return bad(
          fmt::format("--device: unknown value '{}' (expected auto, cpu or cuda)", f.plan.device));
    o.device = *device;
  }
  if (auto ok = check_mode_flags(f, o.cluster); !ok) return ok.err();
  if (o.cluster)
    if (auto t = parse_collective_timeout(f.tp.collective_timeout_s); !t) return t.err();
  if (auto ok = check_sizes(f); !ok) return ok.err();
  if (auto ok = check_writable(f.summary_json, "--summary-json"); !ok) return ok.err();
  if (auto ok = check_writable(f.record, "--record"); !ok) return ok.err();
  if (auto ok = read_workload_flags(f, o); !ok) return ok.err();
  if (auto ok = read_graph_flags(f, o); !ok) return ok.err();
  if (!f.plan.kv_cache_memory.empty()) {
    auto v = parse_byte_sizes(f.plan.kv_cache_memory, "--kv-cache-memory");
    if (!v) return v.err();
    auto per_rank = per_rank_budgets(*v, static_cast<size_t>(f.plan.tensor_parallel_size));
    if (!per_rank) return per_rank.err();
    o.kv_cache_memory = *per_rank;
  }
  o.restart = f.restart_policy == "rebuild" ? restart_policy::rebuild : restart_policy::none;
  o.restart_wait = std::chrono::milliseconds(std::llround(f.restart_wait_s * 1000));
  o.steps = f.step_path == "middleman" ? step_path::middleman : step_path::channel;
  o.step_spin = std::chrono::microseconds(f.step_spin_us);
  o.tls = {f.tls_cert, f.tls_key, f.tls_ca};
  auto limits = transport_limits_from(f.max_message_bytes);
  if (!limits) return limits.err();
  o.transport = *limits;
  auto chaos = resolve_chaos_flags(f.chaos, f.plan.tensor_parallel_size);
  if (!chaos) return chaos.err();
  o.chaos = *chaos;
  return o;
}

} // namespace kvactor
