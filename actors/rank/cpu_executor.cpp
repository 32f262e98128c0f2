#include <fmt/format.h>

#include "actors/rank/executor.hpp"

namespace kvactor {

namespace {

class cpu_executor final : public step_executor {
public:
  cpu_executor(std::unique_ptr<kernels::attention_stack> stack,
               std::shared_ptr<kernels::communicator> comm)
      : stack_(std::move(stack)), comm_(std::move(comm)) {}

  status bind(std::vector<kernels::kv_view> views, std::vector<std::string> layer_names,
              int32_t max_tokens) override {
    views_ = std::move(views);
    names_ = std::move(layer_names);
    hidden_.assign(
        static_cast<size_t>(max_tokens) * static_cast<size_t>(stack_->config().hidden_size), 0.0f);
    return ok();
  }

  expected<std::vector<int32_t>> run(const step_batch& b,
                                     const std::vector<executed_ubatch>& ubatches) override {
    const auto hidden_size = static_cast<size_t>(stack_->config().hidden_size);
    std::vector<int32_t> positions(b.positions.begin(), b.positions.end());
    std::function<void(float*, size_t)> reduce;
    if (comm_ && comm_->world_size() > 1)
      reduce = [this](float* buf, size_t n) { comm_->all_reduce(buf, n); };
    try {
      for (const auto& u : ubatches) {
        auto layers = host_layer_batches_of(u, names_);
        if (!layers) return layers.err();
        const auto start = static_cast<size_t>(u.token_start);
        stack_->forward(b.token_ids.data() + start, positions.data() + start,
                        u.token_end - u.token_start, views_, layers->pointers, reduce,
                        hidden_.data() + start * hidden_size);
      }
      return stack_->sample(hidden_.data(), b.sample_rows);
    } catch (const kernels::collective_error& e) {
      return make_error(errc::collective_failed, e.what());
    } catch (const std::exception& e) {
      // Peers waiting in an all-reduce must not wait for this rank until their timeout.
      if (comm_) comm_->abort(fmt::format("rank {}: {}", comm_->rank(), e.what()));
      return make_error(errc::invalid_argument, e.what());
    }
  }

  std::vector<memory_entry> ledger() const override {
    return {{"activations", static_cast<int64_t>(hidden_.size() * sizeof(float))}};
  }

  const char* device() const override { return "cpu"; }

private:
  std::unique_ptr<kernels::attention_stack> stack_;
  std::shared_ptr<kernels::communicator> comm_;
  std::vector<kernels::kv_view> views_;
  std::vector<std::string> names_;
  std::vector<float> hidden_; // [max_tokens, hidden_size]
};

} // namespace

expected<host_layer_batches> host_layer_batches_of(const executed_ubatch& u,
                                                   const std::vector<std::string>& names) {
  host_layer_batches out;
  out.batches.resize(names.size());
  for (size_t l = 0; l < names.size(); ++l) {
    auto it = u.layers->find(names[l]);
    if (it == u.layers->end())
      return make_error(errc::invalid_argument, fmt::format("no metadata for layer {}", names[l]));
    const auto& m = it->second->common;
    out.batches[l] = {m.query_start_loc.data(), m.seq_lens.data(), m.block_table.data(),
                      m.block_table_width,      m.num_reqs,        m.slot_mapping.data()};
  }
  for (const auto& b : out.batches)
    out.pointers.push_back(&b);
  return out;
}

std::unique_ptr<step_executor> make_cpu_executor(std::unique_ptr<kernels::attention_stack> stack,
                                                 std::shared_ptr<kernels::communicator> comm) {
  return std::make_unique<cpu_executor>(std::move(stack), std::move(comm));
}

} // namespace kvactor
