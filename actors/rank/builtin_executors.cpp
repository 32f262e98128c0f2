// The executors every rank can run: the whole decoder on the CPU (float, the reference) or on
// the GPU, with a checkpoint's weights or generated ones, and the bare step protocol.
// Registered here, and nowhere else.
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/rank/executor_registry.hpp"
#include "model/hf_decoder.hpp"
#include "model/hf_decoder_plan.hpp"
#include "model/loader.hpp"

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
  expected<kernels::sampled_rows> run(const step_batch& b,
                                      const std::vector<executed_ubatch>&) override {
    return kernels::sampled_rows{std::vector<int32_t>(b.sample_ids.size(), 0), {}};
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
  // Refused before a byte is uploaded: the KV cache would be sized in another dtype.
  if (c.model.model_dtype != dtype::bfloat16)
    return make_error(errc::unsupported,
                      fmt::format("model {}: dtype {}: the GPU decoder computes in bfloat16 "
                                  "(--dtype bfloat16, or auto for a float32 checkpoint); run "
                                  "{} on the CPU (--device cpu)",
                                  c.config.model, to_string(c.model.model_dtype),
                                  to_string(c.model.model_dtype)));
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

// MemAvailable of /proc/meminfo, if this system has one.
std::optional<int64_t> available_host_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

// The CPU decoder holds its weights in float: a model that cannot fit is refused before a byte
// of it is read or generated.
status check_host_memory(const executor_context& c, const hf_decoder_config& cfg) {
  const int64_t need = decoder_weight_bytes(cfg, 4);
  const auto available = available_host_bytes();
  if (!available || need <= *available) return ok();
  return make_error(errc::insufficient_memory,
                    fmt::format("model {}: the CPU decoder needs {:.1f} GB of float weights on "
                                "rank {} (tensor-parallel size {}) and this machine has {:.1f} GB "
                                "available: run it on a GPU (--device cuda), over more ranks, or "
                                "without kernels (--no-kernels)",
                                c.config.model, static_cast<double>(need) / 1e9, c.config.rank,
                                c.config.tensor_parallel_size,
                                static_cast<double>(*available) / 1e9));
}

// The whole decoder of a config alone (a shipped name or a config.json), or of a model
// directory's config.json (--load-format synthetic), with weights generated from the run's
// seed: on the GPU generated there, never held on the host.
expected<std::unique_ptr<step_executor>> generated_decoder(const executor_context& c) {
  const int32_t tp = c.config.tensor_parallel_size, rank = c.config.rank;
  const bool gpu = c.config.device == device_kind::cuda;
  auto path = model_config_path(c.config.model);
  if (!path) return path.err();
  auto config = read_config_json(*path);
  if (!config) return config.err();
  auto cfg = read_decoder_config(*config, tp, rank);
  if (!cfg) return make_error(cfg.err().code, fmt::format("{}: {}", *path, cfg.err().message));
  if (!gpu)
    if (auto st = check_host_memory(c, *cfg); !st) return st.err();
  auto src = gpu ? synthetic_hf_shapes(*config, tp, rank)
                 : synthetic_hf_source(*config, tp, rank, c.config.seed);
  if (!src) return make_error(src.err().code, fmt::format("{}: {}", *path, src.err().message));
  return gpu ? gpu_decoder(c, *src, c.config.seed) : cpu_decoder(c, *src, c.config.model);
}

// The whole decoder on the rank's device: a model directory's checkpoint, or generated weights
// for a config alone.
expected<std::unique_ptr<step_executor>> make_decoder(const executor_context& c) {
  // Generated weights for a directory only when asked for (the "synthetic" executor).
  if (auto present = check_weights_present(c.config.model); !present) return present.err();
  const auto dir = checkpoint_directory(c.config.model);
  if (!dir) return generated_decoder(c);
  auto src = open_hf_decoder(*dir, c.config.tensor_parallel_size, c.config.rank);
  if (!src) return src.err();
  if (c.config.device == device_kind::cuda) return gpu_decoder(c, *src, std::nullopt);
  if (auto st = check_host_memory(c, src->config); !st) return st.err();
  return cpu_decoder(c, *src, c.config.model);
}

} // namespace

executor_registry executor_registry::with_builtins() {
  executor_registry r;
  (void)r.add({"cpu", {device_kind::cpu}, make_decoder});
  (void)r.add({"cuda", {device_kind::cuda}, make_decoder});
  (void)r.add({"synthetic", {device_kind::cpu, device_kind::cuda}, generated_decoder});
  (void)r.add({"protocol",
               {device_kind::cpu, device_kind::cuda},
               [](const executor_context& c) -> expected<std::unique_ptr<step_executor>> {
                 return std::unique_ptr<step_executor>(
                     std::make_unique<protocol_executor>(c.config.device));
               }});
  return r;
}

} // namespace kvactor
