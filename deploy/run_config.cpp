#include "deploy/run_config.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/driver/kv_budget.hpp"
#include "deploy/workload.hpp"
#include "model/hf_decoder.hpp"
#include "model/hf_decoder_plan.hpp"
#include "model/loader.hpp"

namespace kvactor {

expected<hf_decoder_config> rank0_decoder_of(const std::string& model,
                                             int32_t tensor_parallel_size) {
  auto path = model_config_path(model);
  if (!path) return path.err();
  auto config = read_config_json(*path);
  if (!config) return config.err();
  auto cfg = read_decoder_config(*config, tensor_parallel_size, 0);
  if (!cfg) return make_error(cfg.err().code, fmt::format("{}: {}", *path, cfg.err().message));
  return cfg;
}

expected<int64_t> decoder_gpu_bytes_of(const std::string& model, int32_t tensor_parallel_size,
                                       int32_t max_tokens) {
  auto cfg = rank0_decoder_of(model, tensor_parallel_size);
  if (!cfg) return cfg.err();
  return decoder_gpu_bytes(*cfg, max_tokens);
}

namespace {

bool runs_kernels(const run_flags& f) {
  return !f.no_kernels;
}

expected<hf_decoder_config> rank0_decoder(const run_flags& f, const run_options& o) {
  return rank0_decoder_of(o.model, f.plan.tensor_parallel_size);
}

expected<int64_t> executor_gpu_bytes(const run_flags& f, const run_options& o) {
  return decoder_gpu_bytes_of(o.model, f.plan.tensor_parallel_size, f.plan.max_num_batched_tokens);
}

// The model as rank 0 loads it (its length and vocabulary shape the workload).
expected<model_layout> load_rank0_model(const run_flags& f, const run_options& o) {
  if (runs_kernels(f) && f.load_format != "synthetic")
    if (auto present = check_weights_present(o.model); !present) return present.err();
  if (runs_kernels(f) && (f.load_format == "synthetic" || !checkpoint_directory(o.model)))
    spdlog::info("model {}: weights generated from --seed {} ({})", o.model, f.seed,
                 f.load_format == "synthetic" ? "--load-format synthetic" : "a config alone");
  load_options opt;
  take<parallel_settings>(opt, f.plan);
  take<dtype_settings>(opt, f.plan);
  auto layouts = load_model(o.model, opt);
  if (!layouts) return layouts.err();
  auto model = std::move(layouts->front());
  // The decoder the executors build must exist for this model (the protocol runs any model).
  if (runs_kernels(f))
    if (auto cfg = rank0_decoder(f, o); !cfg) return cfg.err();
  return model;
}

expected<int64_t> max_model_len_of(const run_flags& f, const model_layout& model) {
  const int64_t len =
      f.plan.max_model_len > 0 ? f.plan.max_model_len : model.max_position_embeddings;
  if (len > model.max_position_embeddings)
    return make_error(errc::invalid_argument,
                      fmt::format("--max-model-len: {} exceeds the model's maximum of {} tokens",
                                  len, model.max_position_embeddings));
  return len;
}

rank_config rank_config_of(const run_flags& f, const run_options& o, device_kind device,
                           int32_t rank, int64_t max_model_len, int64_t budget) {
  const auto& p = f.plan;
  rank_config c;
  take<parallel_settings>(c, p);
  take<dtype_settings>(c, p);
  take<cache_settings>(c, p);
  take<scheduler_limits>(c, p);
  c.max_model_len = max_model_len; // resolved against the model's
  c.rank = rank;
  c.model = o.model;
  c.device = device;
  c.attention_backend = p.attention_backend;
  c.kv_cache_memory = budget;
  take<graph_settings>(c, o);
  c.num_ubatches = f.ubatches;
  c.seed = f.seed;
  c.enable_prefix_caching = f.enable_prefix_caching;
  c.executor = !runs_kernels(f)               ? std::string{"protocol"}
               : f.load_format == "synthetic" ? std::string{"synthetic"}
                                              : std::string{};
  return c;
}

} // namespace

expected<std::vector<int64_t>> kv_cache_budgets(const run_flags& f, const run_options& o,
                                                device_kind device,
                                                const std::optional<kernels::gpu_info>& gpu,
                                                int32_t ranks_per_gpu) {
  const auto ranks = static_cast<size_t>(f.plan.tensor_parallel_size);
  if (!o.kv_cache_memory.empty()) return o.kv_cache_memory;
  if (device == device_kind::cpu || !gpu) return std::vector<int64_t>(ranks, default_cpu_kv_cache);
  // Every GPU rank captures its own graphs; their cap comes off the KV cache.
  const bool graphs = o.cudagraph != cudagraph_mode::none;
  auto decoder_bytes = executor_gpu_bytes(f, o);
  if (!decoder_bytes) return decoder_bytes.err();
  gpu_memory_use use;
  use.total_bytes = gpu->total_bytes;
  use.utilization = f.plan.gpu_memory_utilization;
  use.in_use_bytes = gpu->total_bytes - gpu->free_bytes;
  const int64_t sharing = std::max(ranks_per_gpu, 1);
  use.non_kv_bytes =
      sharing * (*decoder_bytes + gpu_reserve_bytes + (graphs ? o.cudagraph_memory : 0));
  auto budget = gpu_kv_cache_budget(use);
  if (budget) *budget /= sharing;
  if (!budget) {
    auto e = budget.err();
    e.message = fmt::format("GPU {} ({}): {}", gpu->ordinal, gpu->name, e.message);
    return e;
  }
  spdlog::info("GPU {} ({}): {} of {} bytes free; KV cache budget {} bytes{} ({} x total, {} in "
               "use, {} for weights, activations and CUDA graphs)",
               gpu->ordinal, gpu->name, gpu->free_bytes, gpu->total_bytes, *budget,
               sharing > 1 ? fmt::format(" for each of {} ranks sharing it", sharing) : "",
               use.utilization, use.in_use_bytes, use.non_kv_bytes);
  return std::vector<int64_t>(ranks, *budget);
}

expected<run_configuration> configure_run(const run_flags& f, const run_options& o,
                                          device_kind device,
                                          const std::optional<kernels::gpu_info>& gpu,
                                          int32_t ranks_per_gpu) {
  auto model = load_rank0_model(f, o);
  if (!model) return model.err();
  auto max_model_len = max_model_len_of(f, *model);
  if (!max_model_len) return max_model_len.err();
  if (o.prompt_len.second >= *max_model_len)
    return make_error(errc::invalid_argument,
                      fmt::format("--prompt-len: prompts of up to {} tokens, but a prompt must be "
                                  "shorter than the model length of {} tokens (--max-model-len)",
                                  o.prompt_len.second, *max_model_len));
  auto budgets = kv_cache_budgets(f, o, device, gpu, ranks_per_gpu);
  if (!budgets) return budgets.err();
  run_configuration run;
  run.device = device;
  for (int32_t r = 0; r < f.plan.tensor_parallel_size; ++r)
    run.configs.push_back(
        rank_config_of(f, o, device, r, *max_model_len, (*budgets)[static_cast<size_t>(r)]));
  // Prompts draw from the model's whole vocabulary, which the decoder samples.
  run.workload = make_workload(f.requests, o.prompt_len, o.output_len, o.arrival_rate,
                               std::max(model->vocab_size, 2), f.seed, f.shared_prefix_len,
                               f.num_shared_prefixes);
  for (auto& r : run.workload)
    r.sampling.logprobs = f.logprobs.value_or(-1);
  return run;
}

} // namespace kvactor
