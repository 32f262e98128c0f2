// A real model on the CPU: the float decoder (kernels/include/kvactor/kernels/decoder.h) over
// the rank's paged KV cache, its weights loaded from the model directory's safetensors, the next
// token the argmax of the full vocabulary's logits.
#include <algorithm>

#include <fmt/format.h>

#include "actors/rank/executor.hpp"
#include "kvactor/kernels/sampler.h"

namespace kvactor {

namespace {

class decoder_executor final : public step_executor {
public:
  decoder_executor(std::unique_ptr<kernels::decoder> d, std::shared_ptr<comm::communicator> comm,
                   int64_t weight_bytes)
      : d_(std::move(d)), comm_(std::move(comm)), weight_bytes_(weight_bytes) {}

  status bind(std::vector<kernels::kv_view> views, std::vector<std::string> layer_names,
              int32_t max_tokens) override {
    if (views.size() != d_->spec().layers.size())
      return make_error(errc::incompatible_specs,
                        fmt::format("the KV cache has {} attention layers, the checkpoint {}",
                                    views.size(), d_->spec().layers.size()));
    views_ = std::move(views);
    names_ = std::move(layer_names);
    hidden_.assign(static_cast<size_t>(max_tokens) * static_cast<size_t>(d_->spec().hidden_size),
                   0.0f);
    return ok();
  }

  expected<kernels::sampled_rows> run(const step_batch& b,
                                      const std::vector<executed_ubatch>& ubatches) override {
    std::function<void(float*, size_t)> reduce;
    if (comm_ && comm_->world_size() > 1)
      reduce = [this](float* buf, size_t n) { comm_->all_reduce(buf, n); };
    try {
      // The kernels take int32 positions: converted once per step, not per ubatch.
      positions_.assign(b.positions.begin(), b.positions.end());
      for (const auto& u : ubatches)
        if (auto ran = run_ubatch(b, u, reduce); !ran) return ran.err();
      return sample(d_->logits(hidden_.data(), b.sample_rows), b);
    } catch (const comm::collective_error& e) {
      return make_error(errc::collective_failed, e.what());
    } catch (const std::exception& e) {
      if (comm_) comm_->abort(fmt::format("rank {}: {}", comm_->rank(), e.what()));
      return make_error(errc::invalid_argument, e.what());
    }
  }

  std::vector<memory_entry> ledger() const override {
    return {{"weights", weight_bytes_},
            {"activations", static_cast<int64_t>(hidden_.size() * sizeof(float))}};
  }

  const char* device() const override { return "cpu"; }

private:
  status run_ubatch(const step_batch& b, const executed_ubatch& u,
                    const std::function<void(float*, size_t)>& reduce) {
    auto layers = host_layer_batches_of(u, names_);
    if (!layers) return layers.err();
    const auto start = static_cast<size_t>(u.token_start);
    d_->forward(b.token_ids.data() + start, positions_.data() + start, u.token_end - u.token_start,
                views_, layers->pointers, reduce, hidden_.data() + start * d_->spec().hidden_size);
    return ok();
  }

  // Each sampled request's token, as its sampling parameters say (greedy without any), with
  // the logprobs it asks for.
  kernels::sampled_rows sample(const std::vector<float>& logits, const step_batch& b) const {
    std::vector<kernels::sampling_config> cfgs;
    std::vector<uint64_t> keys;
    for (size_t r = 0; r < b.sample_rows.size(); ++r) {
      kernels::sampling_config cfg;
      if (r < b.sample_params.size()) {
        const auto& p = b.sample_params[r];
        cfg = {p.temperature, p.top_k, p.top_p, p.seed, p.logprobs};
      }
      cfgs.push_back(cfg);
      keys.push_back(
          static_cast<uint64_t>(r < b.sample_positions.size() ? b.sample_positions[r] : 0));
    }
    return kernels::sample_host_rows(logits.data(), d_->spec().vocab_size, cfgs, keys,
                                     b.sample_rows.size());
  }

  std::unique_ptr<kernels::decoder> d_;
  std::shared_ptr<comm::communicator> comm_;
  int64_t weight_bytes_;
  std::vector<kernels::kv_view> views_;
  std::vector<std::string> names_;
  std::vector<float> hidden_;      // [max_tokens, hidden_size]
  std::vector<int32_t> positions_; // this step's, as int32
};

} // namespace

std::unique_ptr<step_executor> make_cpu_decoder_executor(std::unique_ptr<kernels::decoder> d,
                                                         std::shared_ptr<comm::communicator> comm,
                                                         int64_t weight_bytes) {
  return std::make_unique<decoder_executor>(std::move(d), std::move(comm), weight_bytes);
}

} // namespace kvactor
