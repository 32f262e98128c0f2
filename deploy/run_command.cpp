#include "deploy/run_command.hpp"

#include <chrono>
#include <cmath>
#include <fstream>
#include <mutex>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "actors/cudagraph/capture_sizes.hpp"
#include "actors/driver/actor.hpp"
#include "actors/inject/actor.hpp"
#include "actors/model/loader.hpp"
#include "actors/rank/actor.hpp"
#include "actors/rank/group.hpp"
#include "actors/rank/workload.hpp"
#include "actors/runtime_config.hpp"
#include "deploy/byte_size.hpp"
#include "deploy/cli.hpp"
#include "deploy/cluster.hpp"
#include "deploy/lists.hpp"
#include "kvactor/kernels/device_runtime.h"
#include "kvactor/kernels/nccl_communicator.h"
#include "messages/caf_error.hpp"
#include "messages/register.hpp"

namespace kvactor {

namespace {

inline constexpr const char* default_model = "kvactor-tiny";
inline constexpr int64_t default_cpu_kv_cache = int64_t{256} << 20;
// CUDA context, cuBLAS workspace and allocator slack a GPU rank needs besides its ledger.
inline constexpr int64_t gpu_reserve_bytes = int64_t{512} << 20;

// Weights (bf16) and activations of the GPU stack for max_tokens tokens: an upper estimate.
int64_t gpu_stack_bytes(const kernels::stack_config& cfg, int32_t max_tokens) {
  int64_t weights = int64_t{cfg.vocab_size} * cfg.hidden_size;
  int64_t widest = cfg.hidden_size;
  for (const auto& l : cfg.layers) {
    const int64_t q = int64_t{l.num_q_heads} * l.head_size;
    const int64_t kv = int64_t{l.num_kv_heads} * l.head_size * 2;
    weights += int64_t{cfg.hidden_size} * (2 * q + kv);
    widest = std::max({widest, q, kv});
  }
  return weights * 2 + int64_t{max_tokens} * widest * 4 * 8;
}

// splitmix64: a small, portable generator, so that a seed means the same workload everywhere.
struct rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int32_t uniform(int32_t lo, int32_t hi) { // [lo, hi]
    return lo + static_cast<int32_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

struct run_error {
  int code;
  std::string message;
};

} // namespace

expected<std::pair<int32_t, int32_t>> parse_range(const std::string& text, const char* flag) {
  auto parse = [&](const std::string& s) -> expected<int32_t> {
    try {
      size_t used = 0;
      long v = std::stol(s, &used);
      if (used != s.size() || v <= 0 || v > (1 << 24)) throw std::invalid_argument(s);
      return static_cast<int32_t>(v);
    } catch (const std::exception&) {
      return make_error(
          errc::invalid_argument,
          fmt::format("{}: '{}' is not a positive token count (N or MIN:MAX)", flag, text));
    }
  };
  auto colon = text.find(':');
  auto lo = parse(text.substr(0, colon));
  if (!lo) return lo.err();
  if (colon == std::string::npos) return std::pair{*lo, *lo};
  auto hi = parse(text.substr(colon + 1));
  if (!hi) return hi.err();
  if (*hi < *lo)
    return make_error(errc::invalid_argument,
                      fmt::format("{}: '{}' has MIN above MAX", flag, text));
  return std::pair{*lo, *hi};
}

std::vector<request_spec> make_workload(int32_t requests, std::pair<int32_t, int32_t> prompt_len,
                                        std::pair<int32_t, int32_t> output_len, double rate,
                                        int32_t vocab, uint64_t seed) {
  rng g{seed * 0x2545f4914f6cdd1dull + 1};
  std::vector<request_spec> out;
  double t = 0.0;
  for (int32_t i = 0; i < requests; ++i) {
    request_spec r;
    r.request_id = static_cast<uint64_t>(i);
    const int32_t n = g.uniform(prompt_len.first, prompt_len.second);
    for (int32_t k = 0; k < n; ++k)
      r.prompt.push_back(g.uniform(0, vocab - 1));
    r.max_output_tokens = g.uniform(output_len.first, output_len.second);
    if (rate > 0 && i > 0) t += -std::log(1.0 - g.unit()) / rate;
    r.arrival_ns = static_cast<int64_t>(t * 1e9);
    out.push_back(std::move(r));
  }
  return out;
}

int run_local(const run_flags& flags, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& message) {
    fmt::print(err, "kvactor run: error: {}\n", message);
    return exit_bad_input;
  };
  const auto& p = flags.plan;
  const std::string model = p.model.empty() ? default_model : p.model;
  // auto: the GPU when one answers (several GPU ranks when NCCL joins them and there are as many
  // GPUs), else the CPU. In cluster mode: the nodes' device, and their GPU.
  std::string device = p.device == "gpu" ? "cuda" : p.device;
  std::string no_gpu;
  const bool cluster_mode = !flags.nodes.empty();
  if (cluster_mode) {
    if (flags.tp.communicator != "auto")
      return bad(fmt::format("--communicator {}: cluster ranks meet through the nodes' transport "
                             "(sockets between CPU nodes, NCCL between GPU nodes)",
                             flags.tp.communicator));
    if (!flags.tp.debug_stall.empty())
      return bad("--debug-stall: a local fault injection; not for --nodes");
    if (flags.inject_port) return bad("--inject-port: not with --nodes (yet)");
    if (device != "auto" && device != "cpu" && device != "cuda")
      return bad(
          fmt::format("--device: unknown value '{}' (expected auto, cpu or cuda)", p.device));
    if (p.tensor_parallel_size < 1 || p.tensor_parallel_size > 64)
      return bad(
          fmt::format("--tensor-parallel-size: {} is outside [1, 64]", p.tensor_parallel_size));
  }
  // The actor system comes first in cluster mode: the nodes say which device the ranks have.
  caf::actor_system_config cfg;
  register_types(cfg);
  configure_step_latency(cfg);
  if (flags.restart_policy != "none" && flags.restart_policy != "rebuild")
    return bad(fmt::format("--restart-policy: unknown value '{}' (expected none or rebuild)",
                           flags.restart_policy));
  if (flags.restart_policy == "rebuild" && !cluster_mode)
    return bad("--restart-policy rebuild: only with --nodes (a local run has no node to wait for)");
  if (!(flags.restart_wait_s > 0))
    return bad(fmt::format("--restart-wait: {} is not a positive number of seconds",
                           flags.restart_wait_s));
  const tls_files tls{flags.tls_cert, flags.tls_key, flags.tls_ca};
  if (tls.enabled() && !cluster_mode)
    return bad("--tls-cert/--tls-key/--tls-ca: only with --nodes");
  if (auto ok = check_tls(tls); !ok) return bad(ok.err().message);
  if (cluster_mode)
    configure_cluster_middleman(cfg, tls);
  else if (flags.inject_port)
    cfg.load<caf::io::middleman>();
  auto sys_ptr = std::make_unique<caf::actor_system>(cfg);
  std::optional<cluster> nodes;
  std::vector<std::string> addresses;
  std::optional<kernels::gpu_info> gpu;
  if (cluster_mode) {
    if (!(flags.tp.collective_timeout_s > 0))
      return bad(fmt::format("--collective-timeout: {} is not a positive number of seconds",
                             flags.tp.collective_timeout_s));
    addresses = split_commas(flags.nodes);
    auto c = connect_cluster(
        *sys_ptr, addresses, p.tensor_parallel_size, device,
        std::chrono::milliseconds(static_cast<int64_t>(flags.tp.collective_timeout_s * 1000)), tls);
    if (!c) return bad(c.err().message);
    nodes = std::move(*c);
    device = nodes->infos.front().device;
    if (device == "cuda") {
      kernels::gpu_info g;
      g.name = "node " + nodes->infos.front().address;
      g.total_bytes = nodes->infos.front().gpu_total_bytes;
      g.free_bytes = nodes->infos.front().gpu_free_bytes;
      gpu = g;
    }
    spdlog::info("cluster: {} rank(s) on {} node(s), {}", p.tensor_parallel_size,
                 nodes->nodes.size(), device);
  } else {
    gpu = kernels::probe_gpu(0, &no_gpu);
  }
  // Leaving early: the nodes' ranks stop, the nodes stay for the next run.
  struct cluster_release {
    caf::actor_system& sys;
    std::optional<cluster>& nodes;
    ~cluster_release() {
      if (!nodes) return;
      for (auto& r : nodes->ranks)
        caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
      release_cluster(sys, *nodes);
    }
  } release_nodes{*sys_ptr, nodes};
  if (device == "auto") {
    std::string ignored;
    const bool gpus_for_tp = p.tensor_parallel_size == 1
                             || (kernels::nccl_available(&ignored)
                                 && p.tensor_parallel_size <= kernels::gpu_count(&ignored));
    device = gpu && gpus_for_tp ? "cuda" : "cpu";
    spdlog::info("--device auto: {}{}", device, gpu ? "" : fmt::format(" ({})", no_gpu));
  }
  if (device != "cpu" && device != "cuda")
    return bad(fmt::format("--device: unknown value '{}' (expected auto, cpu or cuda)", p.device));
  if (device == "cuda" && !gpu) return bad(fmt::format("--device cuda: no usable GPU: {}", no_gpu));
  if (p.tensor_parallel_size < 1 || p.tensor_parallel_size > 64)
    return bad(
        fmt::format("--tensor-parallel-size: {} is outside [1, 64]", p.tensor_parallel_size));
  auto tp =
      cluster_mode ? expected<tp_setup>(tp_setup{
          true,
          std::chrono::milliseconds(static_cast<int64_t>(flags.tp.collective_timeout_s * 1000)),
          std::nullopt})
                   : resolve_tp_flags(flags.tp, device, p.tensor_parallel_size);
  if (!tp) return bad(tp.err().message);
  if (!p.gpu_memory.empty() || !p.weights_memory.empty())
    return bad("--gpu-memory / --weights-memory: a run measures its GPU (or sizes a CPU run with "
               "--kv-cache-memory); they are `kvactor plan` flags");
  if (!(p.gpu_memory_utilization > 0 && p.gpu_memory_utilization <= 1))
    return bad(
        fmt::format("--gpu-memory-utilization: {} is outside (0, 1]", p.gpu_memory_utilization));
  if (flags.ubatches != 1 && flags.ubatches != 2)
    return bad(fmt::format("--ubatches: {} is not 1 or 2", flags.ubatches));
  if (flags.requests < 0) return bad(fmt::format("--requests: {} is negative", flags.requests));
  auto prompt = parse_range(flags.prompt_len, "--prompt-len");
  if (!prompt) return bad(prompt.err().message);
  auto output = parse_range(flags.output_len, "--output-len");
  if (!output) return bad(output.err().message);
  double rate = 0;
  if (flags.arrival_rate != "inf") {
    try {
      size_t used = 0;
      rate = std::stod(flags.arrival_rate, &used);
      if (used != flags.arrival_rate.size() || !(rate > 0)) throw std::invalid_argument("rate");
    } catch (const std::exception&) {
      return bad(
          fmt::format("--arrival-rate: '{}' is not a positive rate or inf", flags.arrival_rate));
    }
  }
  // Resolve the model once here: its length and vocabulary shape the workload.
  load_options lopt;
  lopt.tensor_parallel_size = p.tensor_parallel_size;
  lopt.dtype = p.dtype;
  lopt.kv_cache_dtype = p.kv_cache_dtype;
  auto layouts = load_model(model, lopt);
  if (!layouts) return bad(layouts.err().message);
  const auto& layout = layouts->front();
  if (auto stack = stack_config_for(layout, flags.seed); !stack) return bad(stack.err().message);
  int64_t max_model_len = p.max_model_len > 0 ? p.max_model_len : layout.max_position_embeddings;
  if (max_model_len > layout.max_position_embeddings)
    return bad(fmt::format("--max-model-len: {} exceeds the model's maximum of {} tokens",
                           max_model_len, layout.max_position_embeddings));
  auto mode = parse_cudagraph_mode(p.cudagraph_mode);
  if (!mode) return bad(mode.err().message);
  if (flags.cudagraph_capture != "startup" && flags.cudagraph_capture != "lazy")
    return bad(fmt::format("--cudagraph-capture: unknown value '{}' (expected startup or lazy)",
                           flags.cudagraph_capture));
  auto graph_memory = parse_byte_size(flags.cudagraph_memory, "--cudagraph-memory");
  if (!graph_memory) return bad(graph_memory.err().message);
  std::vector<int32_t> capture_sizes;
  if (!p.cudagraph_capture_sizes.empty()) {
    auto sizes = parse_capture_sizes(p.cudagraph_capture_sizes);
    if (!sizes) return bad(sizes.err().message);
    auto normalized = normalize_capture_sizes(*sizes, p.max_num_batched_tokens);
    if (!normalized) return bad(normalized.err().message);
    capture_sizes = *sizes;
  }
  // Graphs are captured by GPU ranks alone (TP 1 for now); their cap comes off the KV cache.
  const bool graphs =
      device == "cuda" && *mode != cudagraph_mode::none && p.tensor_parallel_size == 1;
  std::vector<int64_t> budget{default_cpu_kv_cache};
  if (device == "cuda" && p.kv_cache_memory.empty()) {
    // vLLM's rule on the measured GPU: utilization x total, less what is in use already, less
    // the stack's weights and activations (and cuBLAS' workspace) that come after this point.
    auto stack = stack_config_for(layout, flags.seed);
    const int64_t later = gpu_stack_bytes(*stack, p.max_num_batched_tokens) + gpu_reserve_bytes
                          + (graphs ? *graph_memory : 0);
    const auto limit =
        static_cast<int64_t>(static_cast<double>(gpu->total_bytes) * p.gpu_memory_utilization);
    const int64_t in_use = gpu->total_bytes - gpu->free_bytes;
    budget = {limit - in_use - later};
    spdlog::info("GPU {} ({}): {} of {} bytes free; KV cache budget {} bytes ({} x total, {} in "
                 "use, {} for weights, activations and CUDA graphs)",
                 gpu->ordinal, gpu->name, gpu->free_bytes, gpu->total_bytes, budget[0],
                 p.gpu_memory_utilization, in_use, later);
    if (budget[0] <= 0)
      return bad(fmt::format("--gpu-memory-utilization {}: leaves no room for a KV cache on GPU "
                             "{} ({} of {} bytes in use, {} needed for weights and activations)",
                             p.gpu_memory_utilization, gpu->ordinal, in_use, gpu->total_bytes,
                             later));
  }
  if (!p.kv_cache_memory.empty()) {
    auto v = parse_byte_sizes(p.kv_cache_memory, "--kv-cache-memory");
    if (!v) return bad(v.err().message);
    budget = *v;
    if (budget.size() != 1 && budget.size() != static_cast<size_t>(p.tensor_parallel_size))
      return bad(fmt::format("--kv-cache-memory: {} values for {} ranks (give one value, or one "
                             "per rank)",
                             budget.size(), p.tensor_parallel_size));
  }
  // One config per rank.
  std::vector<rank_config> configs;
  for (int32_t r = 0; r < p.tensor_parallel_size; ++r) {
    rank_config c;
    c.rank = r;
    c.tensor_parallel_size = p.tensor_parallel_size;
    c.model = model;
    c.dtype = p.dtype;
    c.kv_cache_dtype = p.kv_cache_dtype;
    c.device = device;
    c.attention_backend = p.attention_backend;
    c.block_size = p.block_size;
    c.max_model_len = max_model_len;
    c.max_num_seqs = p.max_num_seqs;
    c.max_num_batched_tokens = p.max_num_batched_tokens;
    c.kv_cache_memory = budget.size() == 1 ? budget[0] : budget.at(static_cast<size_t>(r));
    c.num_gpu_blocks_override = p.num_gpu_blocks_override;
    c.cudagraph = *mode;
    c.cudagraph_capture_sizes = capture_sizes;
    c.cudagraph_lazy = flags.cudagraph_capture == "lazy";
    c.cudagraph_memory = *graph_memory;
    c.num_ubatches = flags.ubatches;
    c.seed = flags.seed;
    c.execute_kernels = !flags.no_kernels;
    configs.push_back(c);
  }
  auto workload =
      make_workload(flags.requests, *prompt, *output, rate,
                    std::min(std::max(layout.vocab_size, 2), max_workload_vocab), flags.seed);

  caf::actor_system& sys = *sys_ptr;
  std::ofstream trace_file;
  std::shared_ptr<trace_recorder> recorder;
  if (!flags.record.empty()) {
    trace_file.open(flags.record, std::ios::binary | std::ios::trunc);
    if (!trace_file) return bad(fmt::format("--record: cannot write '{}'", flags.record));
    recorder = std::make_shared<trace_recorder>(trace_file);
    for (const auto& r : workload)
      recorder->record("client", "driver", r);
  }
  rank_group_options group;
  group.world = p.tensor_parallel_size;
  group.nccl = tp->nccl;
  group.collective_timeout = tp->collective_timeout;
  group.stall = tp->stall;
  group.recorder = recorder;
  std::vector<rank_actor> ranks = nodes ? nodes->ranks : spawn_rank_group(sys, group);
  const bool show = flags.progress && isatty(STDERR_FILENO) == 1;
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  auto on_progress = [show, last, &err](const run_progress& pr) {
    if (!show) return;
    auto now = std::chrono::steady_clock::now();
    if (pr.finished + pr.failed < pr.total && now - *last < std::chrono::milliseconds(100)) return;
    *last = now;
    fmt::print(err,
               "\r  step {:>6}  requests {:>5}/{} done ({} failed)  {:>8} tokens  {:>8.1f} "
               "tok/s",
               pr.steps, pr.finished + pr.failed, pr.total, pr.failed, pr.generated_tokens,
               pr.elapsed_s > 0 ? static_cast<double>(pr.generated_tokens) / pr.elapsed_s : 0.0);
    if (pr.finished + pr.failed >= pr.total) fmt::print(err, "\n");
    err.flush();
  };
  driver_setup setup{ranks, configs, 1, on_progress, recorder};
  setup.bootstrap_communicator = tp->nccl; // cluster mode: sockets or NCCL, bootstrapped alike
  setup.collective_timeout = tp->collective_timeout;
  if (nodes) setup.rank_locations = nodes->locations;
  auto drv = sys.spawn(driver, std::move(setup));
  caf::scoped_actor self{sys};
  std::optional<run_error> failure;
  std::vector<rank_ready> ready;
  injector_actor gateway;
  const auto start = std::chrono::steady_clock::now();
  self->request(drv, caf::infinite, atom::start_v)
      .receive([&](std::vector<rank_ready>& r) { ready = std::move(r); },
               [&](caf::error& e) {
                 failure = run_error{exit_bad_input, from_caf_error(e).message};
               });
  const double ready_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Live injection, once the ranks are ready: loopback only, so that nothing off this machine
  // can reach the actors.
  if (!failure && flags.inject_port) {
    gateway = sys.spawn(injector, injector_setup{drv, ranks, recorder});
    auto port = sys.middleman().publish(gateway, *flags.inject_port, "127.0.0.1", true);
    if (!port) {
      self->send_exit(gateway, caf::exit_reason::user_shutdown);
      self->send_exit(drv, caf::exit_reason::user_shutdown);
      for (auto& r : ranks)
        self->send_exit(r, caf::exit_reason::user_shutdown);
      return bad(fmt::format("--inject-port: cannot listen on 127.0.0.1:{}: {}", *flags.inject_port,
                             sys.render(port.error())));
    }
    fmt::print(err, "kvactor run: injection listens on 127.0.0.1:{}\n", *port);
    err.flush();
  }
  run_summary summary;
  if (!failure) {
    fmt::print(out,
               "kvactor run: {} on {} ({} rank(s), {} ubatch(es)), {} blocks of KV cache, "
               "{} requests\n",
               model, device, configs.size(), flags.ubatches, ready.front().num_blocks,
               workload.size());
    self->request(drv, caf::infinite, atom::submit_v, workload)
        .receive([](int64_t) {},
                 [&](caf::error& e) {
                   failure = run_error{exit_failure, from_caf_error(e).message};
                 });
  }
  if (!failure)
    self->request(drv, caf::infinite, atom::run_v)
        .receive([&](run_summary& s) { summary = std::move(s); },
                 [&](caf::error& e) {
                   failure = run_error{exit_failure, from_caf_error(e).message};
                 });
  if (gateway) self->send_exit(gateway, caf::exit_reason::user_shutdown);
  self->send_exit(drv, caf::exit_reason::user_shutdown);
  for (auto& r : ranks)
    self->send_exit(r, caf::exit_reason::user_shutdown);
  // --restart-policy rebuild: a lost node is waited for, the group rebuilt, the rest re-run.
  int restarts = 0;
  std::vector<std::string> lost;
  if (failure && nodes && flags.restart_policy == "rebuild"
      && (failure->message.find(" is unreachable: ") != std::string::npos
          || failure->message.find(" stopped: ") != std::string::npos)) {
    // A rank was lost while the group started: nothing ran yet; rebuild and run everything.
    summary = run_summary{};
    for (const auto& r : workload)
      summary.results.push_back({r.request_id, false, {}, 0, "not run: " + failure->message});
    summary.failed = static_cast<int64_t>(workload.size());
    summary.error = failure->message;
    failure.reset();
  }
  while (!failure && nodes && flags.restart_policy == "rebuild" && !summary.error.empty()
         && restarts < 3) {
    lost.push_back(summary.error);
    fmt::print(err, "kvactor run: {}; waiting up to {:.0f} s to rebuild the group\n", summary.error,
               flags.restart_wait_s);
    err.flush();
    rebuild_request req;
    req.addresses = addresses;
    req.world = p.tensor_parallel_size;
    req.device = device;
    req.collective_timeout = tp->collective_timeout;
    req.tls = tls;
    req.wait = std::chrono::milliseconds(static_cast<int64_t>(flags.restart_wait_s * 1000));
    req.configs = configs;
    req.workload = workload;
    req.epoch = static_cast<uint64_t>(restarts) + 2;
    auto merged = rebuild_and_rerun(sys, *nodes, req, summary);
    ++restarts;
    if (!merged) {
      summary.error += "; " + merged.err().message;
      break;
    }
    summary = std::move(*merged);
  }
  if (recorder) {
    recorder->record("driver", "client", summary);
    trace_file.flush();
  }
  if (failure) {
    fmt::print(err, "kvactor run: error: {}\n", failure->message);
    return failure->code;
  }
  const double tok_s =
      summary.wall_s > 0
          ? static_cast<double>(summary.prompt_tokens + summary.generated_tokens) / summary.wall_s
          : 0.0;
  fmt::print(out, "requests   {} finished, {} failed, {} preemptions\n", summary.finished,
             summary.failed, summary.preempted);
  for (const auto& r : summary.results)
    if (!r.finished) fmt::print(out, "  request {} failed: {}\n", r.request_id, r.failure);
  fmt::print(out, "tokens     {} prompt, {} generated, {:.1f} tok/s over {:.2f} s\n",
             summary.prompt_tokens, summary.generated_tokens, tok_s, summary.wall_s);
  fmt::print(out, "steps      {} (p50 {:.2f} ms, p99 {:.2f} ms)\n", summary.steps,
             summary.step_ms_p50, summary.step_ms_p99);
  fmt::print(out, "kv blocks  peak {} used of {}\n", summary.kv_blocks_peak_used,
             summary.kv_blocks_total);
  fmt::print(out, "graphs     {} replays, {} eager steps\n", summary.graph_replays,
             summary.eager_steps);
  if (!ready.empty()) { // empty when the first group was lost while starting (then rebuilt)
    fmt::print(out, "ready in   {:.2f} s (model, weights, KV cache{})\n", ready_s,
               ready.front().graphs.mode == cudagraph_mode::none ? ""
               : configs.front().cudagraph_lazy                  ? ", graphs captured lazily later"
                                                                 : ", graph capture");
    for (const auto& ph : ready.front().phases)
      if (ph.phase == "cudagraph capture")
        fmt::print(out, "           graph capture {:.2f} s, {} in graphs\n",
                   static_cast<double>(ph.duration_ns) / 1e9, format_bytes(ph.memory_bytes));
  }
  if (restarts > 0)
    fmt::print(out, "restarts   {} (the group was rebuilt after: {})\n", restarts,
               fmt::join(lost, "; "));
  fmt::print(out, "digest     {}\n", summary.output_digest);
  if (recorder) {
    if (auto why = recorder->failure(); !why.empty()) {
      fmt::print(err, "kvactor run: error: --record: {}\n", why);
      return exit_failure;
    }
    fmt::print(out, "trace      {} messages in {}\n", recorder->count(), flags.record);
  }
  if (!flags.summary_json.empty()) {
    std::ofstream f(flags.summary_json);
    f << summary_json(summary, device, p.tensor_parallel_size, flags.ubatches, ready_s) << '\n';
    if (!f) {
      fmt::print(err, "kvactor run: error: --summary-json: cannot write '{}'\n",
                 flags.summary_json);
      return exit_failure;
    }
  }
  if (!summary.error.empty()) { // e.g. a collective failed: the summary above lists every request
    fmt::print(err, "kvactor run: error: {}\n", summary.error);
    return exit_failure;
  }
  return exit_ok;
}

} // namespace kvactor
