#include "deploy/plan_command.hpp"

#include "deploy/lists.hpp"

#include <charconv>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/registry/assignment.hpp"
#include "deploy/cli.hpp"
#include "deploy/plan_report.hpp"
#include "deploy/run_config.hpp"
#include "kvactor/kernels/device_runtime.h"
#include "messages/byte_size.hpp"
#include "messages/limits.hpp"
#include "model/hf_decoder.hpp"
#include "model/loader.hpp"

namespace kvactor {

expected<std::vector<int32_t>> parse_capture_sizes(const std::string& text) {
  return parse_int_list(text, "--cudagraph-capture-sizes");
}

namespace {

// No budget flag on a GPU machine: the budget `run` would take there. GPU 0's memory, less what
// it already holds, the decoder's estimated bytes (unless --weights-memory says) and the
// reserve. Without a GPU, or for a model whose weights kvactor cannot estimate, the error says
// which flags to give.
status measure_local_gpu(const plan_flags& f, plan_request& r) {
  const std::string flags = "give --kv-cache-memory, or --gpu-memory (with "
                            "--gpu-memory-utilization and --weights-memory), or "
                            "--num-gpu-blocks-override";
  std::string why;
  auto gpu = kernels::probe_gpu(0, &why);
  if (!gpu)
    return make_error(errc::invalid_argument,
                      fmt::format("budget: {}; no local GPU to measure ({})", flags, why));
  int64_t weights = r.budget.weights_memory;
  if (f.weights_memory.empty()) {
    auto bytes = decoder_gpu_bytes_of(f.model, f.tensor_parallel_size, f.max_num_batched_tokens);
    if (!bytes)
      return make_error(errc::invalid_argument,
                        fmt::format("budget: {}: GPU {} answers, but the weights of {} cannot be "
                                    "estimated ({})",
                                    flags, gpu->ordinal, f.model, bytes.err().message));
    weights = *bytes;
  }
  r.budget.gpu_memory = gpu->total_bytes;
  r.budget.weights_memory = weights + gpu_reserve_bytes + (gpu->total_bytes - gpu->free_bytes);
  spdlog::info("plan: GPU {} ({}): {} bytes, {} free; {} for the decoder and {} reserved",
               gpu->ordinal, gpu->name, gpu->total_bytes, gpu->free_bytes, weights,
               gpu_reserve_bytes);
  return ok();
}

// plan reads what the KV cache needs; a config of a family `run` executes is also read as run
// reads it, so that a config run would refuse (a negative epsilon, a vocabulary of text) is
// refused here too, in the same words.
status check_as_run_reads(const plan_flags& f) {
  auto path = model_config_path(f.model);
  if (!path) return path.err();
  auto config = read_config_json(*path);
  if (!config) return config.err();
  const auto type = config->find("model_type");
  if (type == config->end() || !type->is_string()
      || !is_dense_decoder_family(type->get<std::string>()))
    return ok();
  if (auto decoder = rank0_decoder_of(f.model, f.tensor_parallel_size); !decoder)
    return decoder.err();
  return ok();
}

} // namespace

status check_engine_flags(const plan_flags& f) {
  for (auto ok : {check(static_cast<const parallel_settings&>(f), named_as::flag),
                  check(static_cast<const cache_settings&>(f), named_as::flag),
                  check(static_cast<const scheduler_limits&>(f), named_as::flag)})
    if (!ok) return ok;
  if (f.num_speculative_tokens < 0 || f.num_speculative_tokens >= f.max_num_batched_tokens)
    return make_error(errc::invalid_argument,
                      fmt::format("--num-speculative-tokens: {} is outside [0, {}] (a decode "
                                  "step of 1 + N tokens must fit --max-num-batched-tokens {})",
                                  f.num_speculative_tokens, f.max_num_batched_tokens - 1,
                                  f.max_num_batched_tokens));
  if (!(f.gpu_memory_utilization > 0 && f.gpu_memory_utilization <= 1))
    return make_error(errc::invalid_argument,
                      fmt::format("--gpu-memory-utilization: {} is outside (0, 1] (the fraction "
                                  "of the GPU's memory kvactor may use)",
                                  f.gpu_memory_utilization));
  return ok();
}

expected<plan_request> to_plan_request(const plan_flags& f) {
  plan_request r;
  if (f.model.empty())
    return make_error(errc::invalid_argument, "--model: required (a config.json path or a "
                                              "shipped name such as llama-3.1-8b)");
  r.model = f.model;
  // The model first: a name that resolves nowhere is the error to report, not the budget.
  if (auto path = resolve_model_path(f.model); !path) return path.err();
  if (auto ok = check_engine_flags(f); !ok) return ok.err();
  take<parallel_settings>(r.load, f);
  take<dtype_settings>(r.load, f); // the loader checks --dtype and --kv-cache-dtype
  take<cache_settings>(r, f);
  take<scheduler_limits>(r, f);
  auto device = parse_device(f.device);
  if (!device) return device.err();
  r.device = *device;
  r.attention_backend = f.attention_backend;
  r.num_speculative_tokens = f.num_speculative_tokens;
  if (!f.kv_cache_memory.empty()) {
    auto v = parse_byte_sizes(f.kv_cache_memory, "--kv-cache-memory");
    if (!v) return v.err();
    r.budget.kv_cache_memory = *v;
  }
  if (!f.gpu_memory.empty()) {
    auto v = parse_byte_size(f.gpu_memory, "--gpu-memory");
    if (!v) return v.err();
    if (*v == 0) return make_error(errc::invalid_argument, "--gpu-memory: '0' leaves no memory");
    r.budget.gpu_memory = *v;
  }
  if (!f.weights_memory.empty()) {
    auto v = parse_byte_size(f.weights_memory, "--weights-memory");
    if (!v) return v.err();
    r.budget.weights_memory = *v;
  }
  r.budget.gpu_memory_utilization = f.gpu_memory_utilization;
  auto mode = parse_cudagraph_mode(f.cudagraph_mode);
  if (!mode) return mode.err();
  r.cudagraph = *mode;
  if (!f.cudagraph_capture_sizes_text.empty()) {
    auto sizes = parse_capture_sizes(f.cudagraph_capture_sizes_text);
    if (!sizes) return sizes.err();
    r.cudagraph_capture_sizes = *sizes;
  }
  auto layout = parse_kv_cache_layout(f.kv_cache_layout);
  if (!layout) {
    auto e = layout.err();
    e.message = "--kv-cache-layout" + e.message.substr(e.message.find(':'));
    return e;
  }
  r.layout = *layout;
  r.disable_hybrid_kv_cache_manager = f.disable_hybrid_kv_cache_manager;
  r.allow_chunked_local_attn_with_hybrid_kv_cache = f.allow_chunked_local_attn_with_hybrid_kv_cache;
  r.kv_sharing_fast_prefill = f.kv_sharing_fast_prefill;
  const bool no_budget = r.budget.kv_cache_memory.empty() && r.budget.gpu_memory == 0
                         && r.num_gpu_blocks_override == 0;
  if (no_budget && r.device == device_kind::cuda)
    if (auto measured = measure_local_gpu(f, r); !measured) return measured.err();
  if (no_budget && r.device == device_kind::cpu) { // what `run` gives a CPU rank
    r.budget.kv_cache_memory = {default_cpu_kv_cache};
    spdlog::info("plan: --device cpu: {} bytes of KV cache per rank (run's default)",
                 default_cpu_kv_cache);
  }
  return r;
}

int run_plan(const plan_flags& flags, std::ostream& out, std::ostream& err) {
  auto fail = [&](const error& e) {
    fmt::print(err, "kvactor plan: error: {}\n", e.message);
    if (flags.json)
      out << nlohmann::json{{"error", e.message}, {"code", to_string(e.code)}}.dump() << '\n';
    return exit_bad_input;
  };
  auto request = to_plan_request(flags);
  if (!request) return fail(request.err());
  spdlog::debug("planning {} on {} rank(s)", request->model, request->load.tensor_parallel_size);
  auto plan = plan_deployment(*request);
  if (!plan) return fail(plan.err());
  if (auto read = check_as_run_reads(flags); !read) return fail(read.err());
  for (const auto& w : plan->warnings)
    spdlog::debug("plan: {}", w);
  if (flags.json)
    out << plan_to_json(*plan).dump(2) << '\n';
  else
    print_plan(*plan, out);
  return exit_ok;
}

} // namespace kvactor
