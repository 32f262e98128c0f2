#include "deploy/run_options.hpp"

#include <cmath>

#include <fmt/format.h>

#include "actors/cudagraph/capture_sizes.hpp"
#include "actors/driver/kv_budget.hpp"
#include "deploy/byte_size.hpp"
#include "deploy/plan_command.hpp"
#include "deploy/tp_flags.hpp"
#include "deploy/workload.hpp"

namespace kvactor {

namespace {

inline constexpr const char* default_model = "kvactor-tiny";

error bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
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
  if (!(f.restart_wait_s > 0))
    return bad(
        fmt::format("--restart-wait: {} is not a positive number of seconds", f.restart_wait_s));
  const tls_files tls{f.tls_cert, f.tls_key, f.tls_ca};
  if (tls.enabled() && !cluster) return bad("--tls-cert/--tls-key/--tls-ca: only with --nodes");
  return check_tls(tls);
}

status check_sizes(const run_flags& f) {
  const auto& p = f.plan;
  if (p.tensor_parallel_size < 1 || p.tensor_parallel_size > 64)
    return bad(
        fmt::format("--tensor-parallel-size: {} is outside [1, 64]", p.tensor_parallel_size));
  if (!p.gpu_memory.empty() || !p.weights_memory.empty())
    return bad("--gpu-memory / --weights-memory: a run measures its GPU (or sizes a CPU run with "
               "--kv-cache-memory); they are `kvactor plan` flags");
  if (!(p.gpu_memory_utilization > 0 && p.gpu_memory_utilization <= 1))
    return bad(
        fmt::format("--gpu-memory-utilization: {} is outside (0, 1]", p.gpu_memory_utilization));
  if (f.ubatches != 1 && f.ubatches != 2)
    return bad(fmt::format("--ubatches: {} is not 1 or 2", f.ubatches));
  if (f.requests < 0) return bad(fmt::format("--requests: {} is negative", f.requests));
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
  o.lazy_capture = f.cudagraph_capture == "lazy";
  auto memory = parse_byte_size(f.cudagraph_memory, "--cudagraph-memory");
  if (!memory) return memory.err();
  o.cudagraph_memory = *memory;
  if (f.plan.cudagraph_capture_sizes.empty()) return ok();
  auto sizes = parse_capture_sizes(f.plan.cudagraph_capture_sizes);
  if (!sizes) return sizes.err();
  if (auto normalized = normalize_capture_sizes(*sizes, f.plan.max_num_batched_tokens); !normalized)
    return normalized.err();
  o.capture_sizes = *sizes;
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
