// The GPU executor: the decoder (a cuda_stack) on the current CUDA device. Per step the batch and
// the builders' metadata are packed into one pinned staging buffer and copied to the device with
// one cudaMemcpyAsync; the decoder then runs every ubatch on the executor's stream and samples.
// With tensor parallelism each layer's all-reduce is enqueued on the same stream through the
// communicator (NCCL), and the executor waits for the collectives with the communicator's
// timeout before sampling, so a peer that never arrives is an error, never a blocked stream.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "actors/rank/executor.hpp"
#include "actors/rank/graph_runner.hpp"
#include "actors/rank/weight_upload.hpp"
#include "kvactor/kernels/cuda/decoder_cuda.h"

namespace kvactor {

namespace {

error from_status(const kernels::cuda_status& s) {
  return make_error(s.code() == cudaErrorInvalidValue ? errc::invalid_argument : errc::io_error,
                    s.message());
}

// Grows by doubling; pinned host or device memory, freed on destruction.
class staging {
public:
  ~staging() {
    if (host_) cudaFreeHost(host_);
    if (device_) cudaFree(device_);
  }
  kernels::cuda_status reserve(size_t bytes) {
    if (bytes <= capacity_) return {};
    size_t cap = std::max<size_t>(capacity_ * 2, std::max<size_t>(bytes, 1 << 16));
    if (host_) cudaFreeHost(host_);
    if (device_) cudaFree(device_);
    host_ = nullptr;
    device_ = nullptr;
    capacity_ = 0;
    KVACTOR_CUDA_CALL(cudaMallocHost(&host_, cap));
    KVACTOR_CUDA_CALL(cudaMalloc(&device_, cap));
    capacity_ = cap;
    return {};
  }
  std::byte* host() const { return static_cast<std::byte*>(host_); }
  std::byte* device() const { return static_cast<std::byte*>(device_); }
  size_t capacity() const { return capacity_; }

private:
  void* host_ = nullptr;
  void* device_ = nullptr;
  size_t capacity_ = 0;
};

// Lays arrays out in the staging buffer (16-byte aligned) and remembers their device addresses.
class packer {
public:
  template <class T>
  size_t add(const T* data, size_t count) {
    offset_ = (offset_ + 15) / 16 * 16;
    const size_t at = offset_;
    pieces_.push_back({at, reinterpret_cast<const std::byte*>(data), count * sizeof(T)});
    offset_ += count * sizeof(T);
    return at;
  }
  size_t bytes() const { return offset_; }
  void copy_into(std::byte* host) const {
    for (const auto& p : pieces_)
      if (p.bytes > 0) std::memcpy(host + p.at, p.data, p.bytes);
  }

private:
  struct piece {
    size_t at;
    const std::byte* data;
    size_t bytes;
  };
  std::vector<piece> pieces_;
  size_t offset_ = 0;
};

class cuda_executor final : public step_executor {
public:
  cuda_executor(std::unique_ptr<kernels::cuda_stack> stack, cudaStream_t stream,
                std::shared_ptr<comm::communicator> comm)
      : stack_(std::move(stack)), stream_(stream), comm_(std::move(comm)) {}

  ~cuda_executor() override {
    graphs_.reset(); // graphs reference the stack, the stream and hidden_
    if (hidden_) cudaFree(hidden_);
    stack_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }

  status bind(std::vector<kernels::kv_view> views, std::vector<std::string> layer_names,
              int32_t max_tokens) override {
    for (size_t l = 0; l < views.size(); ++l)
      if (views[l].base != nullptr && views[l].type != stack_->dtype()
          && views[l].type != kernels::element_type::fp8_e4m3)
        return make_error(errc::invalid_argument,
                          fmt::format("layer {}: the KV cache holds {}, the GPU stack computes "
                                      "in {} (and reads fp8_e4m3 caches)",
                                      layer_names[l], kernels::to_string(views[l].type),
                                      kernels::to_string(stack_->dtype())));
    if (max_tokens > stack_->max_tokens())
      return make_error(errc::invalid_argument,
                        fmt::format("max_tokens: {} exceeds the {} the stack was built for",
                                    max_tokens, stack_->max_tokens()));
    views_ = std::move(views);
    names_ = std::move(layer_names);
    const size_t bytes = static_cast<size_t>(max_tokens)
                         * static_cast<size_t>(stack_->hidden_size()) * sizeof(float);
    if (hidden_) cudaFree(hidden_);
    hidden_ = nullptr;
    if (auto e = cudaMalloc(reinterpret_cast<void**>(&hidden_), bytes); e != cudaSuccess)
      return make_error(
          errc::insufficient_memory,
          fmt::format("hidden states: cudaMalloc of {} bytes: {}", bytes, cudaGetErrorString(e)));
    hidden_bytes_ = bytes;
    return ok();
  }

  expected<kernels::sampled_rows> run(const step_batch& b,
                                      const std::vector<executed_ubatch>& ubatches) override {
    auto packed = pack_and_upload(b, ubatches);
    if (!packed) return packed.err();
    // The all-reduce of every layer, on the stack's stream; a collective failure is kept whole.
    std::optional<std::string> collective_failure;
    std::function<kernels::cuda_status(float*, size_t)> reduce;
    if (comm_ && comm_->world_size() > 1)
      reduce = [this, &collective_failure](float* buf, size_t n) -> kernels::cuda_status {
        try {
          comm_->all_reduce(buf, n, comm::reduce_op::sum, stream_);
          return {};
        } catch (const comm::collective_error& e) {
          collective_failure = e.what();
          return kernels::cuda_status::failure(cudaErrorUnknown, e.what());
        }
      };
    auto failed = [&](const kernels::cuda_status& st) -> error {
      if (collective_failure) return make_error(errc::collective_failed, *collective_failure);
      if (comm_) comm_->abort(fmt::format("rank {}: {}", comm_->rank(), st.message()));
      return from_status(st);
    };
    const auto hidden_size = static_cast<size_t>(stack_->hidden_size());
    for (size_t u = 0; u < ubatches.size(); ++u) {
      auto st =
          stack_->forward(device_step_of(*packed, ubatches[u], u), views_, reduce,
                          hidden_ + static_cast<size_t>(ubatches[u].token_start) * hidden_size);
      if (!st) return failed(st);
    }
    // Sampling waits on the stream: first make sure no collective on it waits for a peer.
    if (reduce) try {
        comm_->synchronize();
      } catch (const comm::collective_error& e) {
        return make_error(errc::collective_failed, e.what());
      }
    kernels::sampled_rows sampled;
    if (auto st = stack_->sample(hidden_, rows_to_sample(b), sampled); !st) return failed(st);
    return sampled;
  }

  status prepare_graphs(const graph_setup& setup) override {
    if (!hidden_)
      return make_error(errc::invalid_argument, "CUDA graphs: prepare_graphs before bind");
    if (setup.layer_group.size() != names_.size())
      return make_error(errc::invalid_argument,
                        fmt::format("CUDA graphs: layer_group has {} entries for {} layers",
                                    setup.layer_group.size(), names_.size()));
    graphs_.reset();
    num_groups_ = 0;
    for (int32_t g : setup.layer_group)
      num_groups_ = std::max(num_groups_, g + 1);
    auto r =
        graph_runner::create(*stack_, views_, setup.layer_group, num_groups_,
                             {setup.max_reqs, setup.max_tokens, setup.max_width}, hidden_, comm_);
    if (!r) return r.err();
    graphs_ = std::move(*r);
    layer_group_ = setup.layer_group;
    fail_capture_ = setup.fail_capture;
    captures_ = 0;
    return ok();
  }

  // Every rank of a tensor-parallel group captures the same graphs in the same order; a graph
  // one of them could not capture is dropped by all, so that they all run that size eagerly.
  expected<graph_capture> capture(const batch_descriptor& graph) override {
    if (!graphs_)
      return make_error(errc::invalid_argument, "CUDA graphs: capture before prepare_graphs");
    const auto t0 = std::chrono::steady_clock::now();
    status captured = ++captures_ == fail_capture_
                          ? status{make_error(errc::io_error, fmt::format("capture #{} fails "
                                                                          "(--debug-fail-capture)",
                                                                          captures_))}
                          : graphs_->capture(graph);
    if (auto agreed = agree_on_capture(graph, static_cast<bool>(captured)); !agreed)
      return agreed.err();
    if (!captured) return captured.err();
    auto bytes = agree_on_bytes(graphs_->graph_bytes(graph));
    if (!bytes) return bytes.err();
    return graph_capture{*bytes, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - t0)
                                     .count()};
  }

  expected<kernels::sampled_rows> run_dispatched(const step_batch& b,
                                                 const std::vector<executed_ubatch>& ubatches,
                                                 const batch_descriptor& wanted,
                                                 batch_descriptor& executed) override {
    auto groups = replayable(b, ubatches, wanted);
    if (groups.empty()) {
      executed = eager_descriptor(b, ubatches);
      return run(b, ubatches);
    }
    const bool full = wanted.mode == cudagraph_mode::full;
    const int32_t reqs = full ? wanted.num_reqs : b.num_reqs();
    if (auto st = graphs_->stage(b, groups, wanted.num_tokens, reqs); !st) return st.err();
    if (auto st = graphs_->replay(wanted, reqs); !st) {
      if (comm_) comm_->abort(fmt::format("rank {}: {}", comm_->rank(), st.err().message));
      return st.err();
    }
    // Sampling waits on the stream: first make sure no collective in the graph waits for a peer.
    if (comm_ && comm_->world_size() > 1) try {
        comm_->synchronize();
      } catch (const comm::collective_error& e) {
        return make_error(errc::collective_failed, e.what());
      }
    kernels::sampled_rows sampled;
    if (auto st = stack_->sample(hidden_, rows_to_sample(b), sampled); !st) return from_status(st);
    executed = wanted;
    return sampled;
  }

  std::vector<memory_entry> ledger() const override {
    std::vector<memory_entry> out{
        {"weights (device)", static_cast<int64_t>(stack_->weights_bytes())},
        {"activations (device)", static_cast<int64_t>(stack_->activation_bytes() + hidden_bytes_)},
        {"step staging (device + pinned host)", static_cast<int64_t>(staging_.capacity())}};
    if (graphs_) {
      out.push_back({"cudagraph inputs (device + pinned host)", graphs_->buffer_bytes()});
      out.push_back({fmt::format("cudagraphs ({} captured, device)", graphs_->num_graphs()),
                     graphs_->graph_bytes()});
    }
    return out;
  }

  const char* device() const override { return "cuda"; }

private:
  // With tensor parallelism: whether every rank captured `graph`; a graph only some captured is
  // dropped (`captured` says how this rank fared). A failed agreement is the capture's error.
  status agree_on_capture(const batch_descriptor& graph, bool captured) {
    if (!comm_ || comm_->world_size() <= 1) return ok();
    int64_t everyone = 0;
    try {
      everyone = comm_->agree(captured ? 1 : 0, comm::reduce_op::min);
    } catch (const comm::collective_error& e) {
      graphs_->drop(graph);
      return make_error(errc::collective_failed, e.what());
    }
    if (everyone == 1 || !captured) return ok();
    graphs_->drop(graph);
    return make_error(errc::unsupported,
                      fmt::format("a peer could not capture the {} graph of {} tokens: the group "
                                  "runs it eagerly",
                                  to_string(graph.mode), graph.num_tokens));
  }

  // With tensor parallelism: the bytes every rank reports for a graph, the same on all, so that
  // every rank's graph manager stops at the same graph when --cudagraph-memory runs out. The
  // graphs of a group are alike; what differs is what cudaMemGetInfo saw around each capture,
  // which includes the captures of ranks sharing the GPU: the least is the nearest.
  expected<int64_t> agree_on_bytes(int64_t measured) {
    if (!comm_ || comm_->world_size() <= 1) return measured;
    try {
      return comm_->agree(measured, comm::reduce_op::min);
    } catch (const comm::collective_error& e) {
      return make_error(errc::collective_failed, e.what());
    }
  }

  // The step's sampled rows with each request's sampling parameters and draw key.
  static kernels::sample_rows rows_to_sample(const step_batch& b) {
    kernels::sample_rows out;
    out.rows = b.sample_rows;
    for (size_t r = 0; r < b.sample_rows.size(); ++r) {
      kernels::sampling_config cfg;
      if (r < b.sample_params.size()) {
        const auto& p = b.sample_params[r];
        cfg = {p.temperature, p.top_k, p.top_p, p.seed, p.logprobs};
      }
      out.params.push_back(cfg);
      out.keys.push_back(
          static_cast<uint64_t>(r < b.sample_positions.size() ? b.sample_positions[r] : 0));
    }
    return out;
  }

  // Where one metadata object's arrays sit in the uploaded step (byte offsets).
  struct meta_at {
    size_t qsl, seq_lens, table, slots;
  };
  // The step as uploaded: token ids and positions, and every ubatch's metadata.
  struct packed_step {
    size_t ids_at = 0, pos_at = 0;
    std::vector<std::map<const backend_metadata*, meta_at>> placed; // [ubatch]
  };

  // Packs the whole step first (the staging buffer is reused, so no copy may be in flight), then
  // uploads it with one copy on the stack's stream.
  expected<packed_step> pack_and_upload(const step_batch& b,
                                        const std::vector<executed_ubatch>& ubatches) {
    positions_.assign(b.positions.begin(), b.positions.end());
    packer pack;
    packed_step out;
    out.ids_at = pack.add(b.token_ids.data(), b.token_ids.size());
    out.pos_at = pack.add(positions_.data(), positions_.size());
    out.placed.resize(ubatches.size());
    for (size_t u = 0; u < ubatches.size(); ++u)
      for (const auto& name : names_) {
        auto it = ubatches[u].layers->find(name);
        if (it == ubatches[u].layers->end())
          return make_error(errc::invalid_argument, fmt::format("no metadata for layer {}", name));
        const auto* m = it->second.get();
        if (out.placed[u].count(m) > 0) continue;
        const auto& c = m->common;
        const auto rows =
            static_cast<size_t>(c.num_reqs) * static_cast<size_t>(c.block_table_width);
        out.placed[u][m] = {
            pack.add(c.query_start_loc.data(), c.query_start_loc.size()),
            pack.add(c.seq_lens.data(), c.seq_lens.size()),
            pack.add(c.block_table.data(), std::min(rows, c.block_table.size())),
            pack.add(c.slot_mapping.data(),
                     std::min(static_cast<size_t>(ubatches[u].token_end - ubatches[u].token_start),
                              c.slot_mapping.size()))};
      }
    if (auto st = staging_.reserve(pack.bytes()); !st) return from_status(st);
    pack.copy_into(staging_.host());
    if (auto e = cudaMemcpyAsync(staging_.device(), staging_.host(), pack.bytes(),
                                 cudaMemcpyHostToDevice, stream_);
        e != cudaSuccess)
      return make_error(errc::io_error,
                        fmt::format("step upload: cudaMemcpyAsync: {}", cudaGetErrorString(e)));
    return out;
  }

  // Ubatch u of the uploaded step, as the stack reads it: device pointers per layer.
  kernels::device_step device_step_of(const packed_step& p, const executed_ubatch& ub,
                                      size_t u) const {
    auto* dev = staging_.device();
    kernels::device_step step;
    step.token_ids = reinterpret_cast<const int32_t*>(dev + p.ids_at) + ub.token_start;
    step.positions = reinterpret_cast<const int32_t*>(dev + p.pos_at) + ub.token_start;
    step.num_tokens = ub.token_end - ub.token_start;
    bool known = true; // max_query_len: every layer's metadata must know it
    for (const auto& name : names_) {
      const auto* m = ub.layers->find(name)->second.get();
      known = known && m->common.max_query_len > 0;
      step.max_query_len = std::max(step.max_query_len, m->common.max_query_len);
      const auto& at = p.placed[u].at(m);
      step.layers.push_back({reinterpret_cast<const int32_t*>(dev + at.qsl),
                             reinterpret_cast<const int32_t*>(dev + at.seq_lens),
                             reinterpret_cast<const int32_t*>(dev + at.table),
                             reinterpret_cast<const int64_t*>(dev + at.slots),
                             m->common.block_table_width, m->common.num_reqs});
    }
    if (!known) step.max_query_len = 0;
    return step;
  }

  // The metadata of each group when `wanted` names a captured graph this batch fits (one
  // ubatch; FULL: uniform one-token decode; every layer of a group on one metadata object);
  // empty: run eagerly.
  std::vector<const backend_metadata*> replayable(const step_batch& b,
                                                  const std::vector<executed_ubatch>& ubatches,
                                                  const batch_descriptor& wanted) const {
    if (!graphs_ || wanted.mode == cudagraph_mode::none || ubatches.size() != 1
        || !graphs_->captured(wanted) || wanted.num_tokens < b.num_tokens())
      return {};
    if (wanted.mode == cudagraph_mode::full
        && (b.num_tokens() != b.num_reqs() || wanted.num_reqs < b.num_reqs()))
      return {};
    std::vector<const backend_metadata*> out(static_cast<size_t>(num_groups_), nullptr);
    for (size_t l = 0; l < names_.size(); ++l) {
      auto it = ubatches[0].layers->find(names_[l]);
      if (it == ubatches[0].layers->end()) return {};
      auto& slot = out[static_cast<size_t>(layer_group_[l])];
      if (slot != nullptr && slot != it->second.get()) return {};
      slot = it->second.get();
    }
    for (const auto* m : out)
      if (m == nullptr) return {};
    return out;
  }

  std::unique_ptr<kernels::cuda_stack> stack_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<comm::communicator> comm_; // null or world 1: no all-reduce
  std::vector<kernels::kv_view> views_;
  std::vector<std::string> names_;
  float* hidden_ = nullptr; // device [max_tokens, hidden_size]
  size_t hidden_bytes_ = 0;
  staging staging_;
  std::vector<int32_t> positions_;
  std::unique_ptr<graph_runner> graphs_; // null: every step eager
  std::vector<int32_t> layer_group_;
  int32_t num_groups_ = 0; // max(layer_group_) + 1
  uint64_t fail_capture_ = 0, captures_ = 0;
};

// Makes `device` current and checks that the communicator can all-reduce there; a stream for
// the stack.
expected<cudaStream_t> open_device(int32_t device, const comm::communicator* comm,
                                   int32_t tp_size) {
  int count = 0;
  if (auto e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0)
    return make_error(errc::unsupported,
                      fmt::format("device: cuda: no usable GPU ({})",
                                  e != cudaSuccess ? cudaGetErrorString(e) : "none visible"));
  if (device < 0 || device >= count)
    return make_error(
        errc::unsupported,
        fmt::format("device: cuda: GPU {} does not exist ({} visible)", device, count));
  if (auto e = cudaSetDevice(device); e != cudaSuccess)
    return make_error(errc::io_error, fmt::format("device: cuda: cudaSetDevice({}): {}", device,
                                                  cudaGetErrorString(e)));
  if (comm && comm->world_size() > 1 && comm->space() != comm::memory_space::device)
    return make_error(errc::unsupported,
                      "communicator: a GPU rank all-reduces device memory; this communicator "
                      "holds host memory (use NCCL for tensor parallelism on GPUs)");
  const int world = comm ? comm->world_size() : 1;
  if (tp_size != world)
    return make_error(errc::invalid_argument,
                      fmt::format("communicator: the model is split over {} rank(s), the "
                                  "communicator joins {}",
                                  tp_size, world));
  cudaStream_t stream = nullptr;
  if (auto e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
    return make_error(errc::io_error,
                      fmt::format("device: cuda: cudaStreamCreate: {}", cudaGetErrorString(e)));
  return stream;
}

} // namespace

expected<std::unique_ptr<step_executor>>
make_cuda_decoder_executor(const hf_decoder_config& cfg, const gpu_weight_source& weights,
                           int32_t max_tokens, std::shared_ptr<comm::communicator> comm,
                           int32_t device) {
  auto stream = open_device(device, comm.get(), cfg.tp);
  if (!stream) return stream.err();
  kernels::decoder_cuda_options opt;
  opt.max_tokens = max_tokens;
  opt.stream = *stream;
  auto decoder = load_decoder_cuda(cfg, weights, opt);
  if (!decoder) {
    cudaStreamDestroy(*stream);
    return decoder.err();
  }
  return std::unique_ptr<step_executor>(
      std::make_unique<cuda_executor>(std::move(*decoder), *stream, std::move(comm)));
}

} // namespace kvactor
