// The executors every rank can run: the CPU reference stack, the GPU stack and the bare step
// protocol. Registered here, and nowhere else.
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/model/hf_decoder.hpp"
#include "actors/model/loader.hpp"
#include "actors/rank/executor_registry.hpp"
#include "actors/rank/workload.hpp"

namespace kvactor {

namespace {

// The step protocol without kernels (pipeline and fan-out benchmarks): every sampled request
// gets token 0, nothing is allocated.
class protocol_executor final : public step_executor {
public:
  explicit protocol_executor(device_kind device) : device_(device) {}

  status bind(std::vector<kernels::kv_view>, std::vector<std::string>, int32_t) override {
    return ok();
  }
  expected<std::vector<int32_t>> run(const step_batch& b,
                                     const std::vector<executed_ubatch>&) override {
    return std::vector<int32_t>(b.sample_ids.size(), 0);
  }
  status prepare_graphs(const graph_setup&) override {
    return make_error(errc::unsupported,
                      "CUDA graphs: the protocol executor runs no kernels; every step is eager");
  }
  std::vector<memory_entry> ledger() const override { return {}; }
  const char* device() const override { return device_ == device_kind::cuda ? "cuda" : "cpu"; }

private:
  device_kind device_;
};

// The CPU decoder over `src`'s weights, converted to float.
expected<std::unique_ptr<step_executor>>
cpu_decoder(const executor_context& c, const hf_decoder_source& src, const std::string& name) {
  auto weights = load_decoder_weights(src.ckpt, src.config);
  if (!weights)
    return make_error(weights.err().code, fmt::format("{}: {}", name, weights.err().message));
  int64_t bytes = 0;
  auto count = [&](const std::vector<float>& w) { bytes += static_cast<int64_t>(w.size() * 4); };
  count(weights->embed);
  count(weights->lm_head);
  count(weights->final_norm);
  for (const auto& l : weights->layers)
    for (const auto* w : {&l.q, &l.k, &l.v, &l.o, &l.q_bias, &l.k_bias, &l.v_bias, &l.q_norm,
                          &l.k_norm, &l.input_norm, &l.post_attn_norm, &l.pre_ffn_norm,
                          &l.post_ffn_norm, &l.gate, &l.up, &l.down})
      count(*w);
  try {
    return make_cpu_decoder_executor(
        std::make_unique<kernels::decoder>(src.config.spec, std::move(*weights)), c.comm, bytes);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument, fmt::format("model {}: {}", name, e.what()));
  }
}

// The GPU decoder over `src`: its checkpoint uploaded with a progress line every second, or,
// with `generated_seed`, its weights generated on the device.
expected<std::unique_ptr<step_executor>> gpu_decoder(const executor_context& c,
                                                     const hf_decoder_source& src,
                                                     std::optional<uint64_t> generated_seed) {
  upload_options upload;
  const int32_t rank = c.config.rank;
  upload.progress = [rank](const upload_progress& p) {
    spdlog::info("rank {}: weights {:.2f} / {:.2f} GB ({:.2f} GB/s)", rank,
                 static_cast<double>(p.done_bytes) / 1e9, static_cast<double>(p.total_bytes) / 1e9,
                 p.seconds > 0 ? static_cast<double>(p.done_bytes) / 1e9 / p.seconds : 0.0);
  };
  const bool tp = c.comm && c.comm->world_size() > 1;
  return make_cuda_decoder_executor(src.config, {src.ckpt, upload, generated_seed},
                                    c.config.max_num_batched_tokens, tp ? c.comm : nullptr, c.gpu);
}

// The whole decoder on the rank's device: a checkpoint's weights, or generated ones for a
// config alone (on the GPU generated there, never held on the host).
expected<std::unique_ptr<step_executor>> make_decoder(const executor_context& c) {
  const int32_t tp = c.config.tensor_parallel_size, rank = c.config.rank;
  const bool gpu = c.config.device == device_kind::cuda;
  if (auto dir = checkpoint_directory(c.config.model)) {
    auto src = open_hf_decoder(*dir, tp, rank);
    if (!src) return src.err();
    return gpu ? gpu_decoder(c, *src, std::nullopt) : cpu_decoder(c, *src, c.config.model);
  }
  auto path = resolve_model_path(c.config.model);
  if (!path) return path.err();
  auto config = read_config_json(*path);
  if (!config) return config.err();
  auto src = gpu ? synthetic_hf_shapes(*config, tp, rank)
                 : synthetic_hf_source(*config, tp, rank, c.config.seed);
  if (!src) return make_error(src.err().code, fmt::format("{}: {}", *path, src.err().message));
  return gpu ? gpu_decoder(c, *src, c.config.seed) : cpu_decoder(c, *src, c.config.model);
}

expected<std::unique_ptr<step_executor>> make_cpu(const executor_context& c) {
  // A model directory runs its checkpoint on the decoder, whichever CPU executor was named.
  if (checkpoint_directory(c.config.model)) return make_decoder(c);
  auto stack = stack_config_for(c.model, c.config.seed);
  if (!stack) return stack.err();
  try {
    return make_cpu_executor(std::make_unique<kernels::attention_stack>(std::move(*stack)), c.comm);
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument,
                      fmt::format("model {}: {}", c.config.model, e.what()));
  }
}

expected<std::unique_ptr<step_executor>> make_cuda(const executor_context& c) {
  // A model directory runs its checkpoint on the GPU decoder.
  if (checkpoint_directory(c.config.model)) return make_decoder(c);
  auto stack = stack_config_for(c.model, c.config.seed);
  if (!stack) return stack.err();
  // One rank alone all-reduces nothing.
  const bool tp = c.comm && c.comm->world_size() > 1;
  return make_cuda_executor(*stack, c.config.max_num_batched_tokens, tp ? c.comm : nullptr, c.gpu);
}

} // namespace

executor_registry executor_registry::with_builtins() {
  executor_registry r;
  (void)r.add({"cpu", {device_kind::cpu}, make_cpu});
  (void)r.add({"cuda", {device_kind::cuda}, make_cuda});
  (void)r.add({"decoder", {device_kind::cpu, device_kind::cuda}, make_decoder});
  (void)r.add({"protocol",
               {device_kind::cpu, device_kind::cuda},
               [](const executor_context& c) -> expected<std::unique_ptr<step_executor>> {
                 return std::unique_ptr<step_executor>(
                     std::make_unique<protocol_executor>(c.config.device));
               }});
  return r;
}

} // namespace kvactor
