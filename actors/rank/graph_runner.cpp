#include "actors/rank/graph_runner.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "kvactor/comm/collective_ledger.h"

namespace kvactor {

namespace {

error cuda_error(cudaError_t e, const char* what) {
  return make_error(errc::io_error, fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

// Carves aligned arrays out of one allocation (device and host mirror share the offsets).
struct layout {
  size_t bytes = 0;
  template <class T>
  size_t take(size_t count) {
    bytes = (bytes + 255) / 256 * 256;
    const size_t at = bytes;
    bytes += count * sizeof(T);
    return at;
  }
};

} // namespace

expected<std::unique_ptr<graph_runner>>
graph_runner::create(kernels::cuda_stack& stack, std::vector<kernels::kv_view> views,
                     std::vector<int32_t> layer_group, int32_t num_groups,
                     graph_runner_limits limits, float* hidden,
                     std::shared_ptr<comm::communicator> comm) {
  auto r = allocate(stack, std::move(views), std::move(layer_group), num_groups, limits, hidden);
  if (comm && comm->world_size() > 1) {
    // The warm-up all-reduces: a rank that could not set up its buffers must not leave its
    // peers waiting in them. The group goes on together or not at all.
    int64_t everyone = 0;
    try {
      everyone = comm->agree(r ? 1 : 0, comm::reduce_op::min);
    } catch (const comm::collective_error& e) {
      return make_error(errc::collective_failed, e.what());
    }
    if (!r) return r.err();
    if (everyone == 0)
      return make_error(errc::unsupported, "graph_runner: a peer could not set up its graph "
                                           "buffers; no rank of the group captures graphs");
    (*r)->comm_ = std::move(comm);
  }
  if (!r) return r.err();
  // One eager forward before any capture: lazily initialised state (cuBLAS, kernel attributes)
  // must not be set up inside a capture.
  auto& g = **r;
  if (auto st = stack.forward(g.step_for(1, 1), g.views_, g.reducer(), hidden); !st)
    return make_error(errc::io_error, fmt::format("graph_runner: warm-up step: {}", st.message()));
  if (g.comm_) try {
      g.comm_->synchronize(); // a peer that never warms up is a timeout, not a blocked stream
    } catch (const comm::collective_error& e) {
      return make_error(errc::collective_failed,
                        fmt::format("graph_runner: warm-up step: {}", e.what()));
    }
  if (auto e = cudaStreamSynchronize(stack.stream()); e != cudaSuccess)
    return cuda_error(e, "graph_runner: warm-up step");
  return r;
}

expected<std::unique_ptr<graph_runner>>
graph_runner::allocate(kernels::cuda_stack& stack, std::vector<kernels::kv_view> views,
                       std::vector<int32_t> layer_group, int32_t num_groups,
                       graph_runner_limits limits, float* hidden) {
  if (limits.max_reqs <= 0 || limits.max_tokens <= 0 || limits.max_width <= 0 || num_groups <= 0)
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: max_reqs {}, max_tokens {}, max_width {}, "
                                  "groups {}: must be positive",
                                  limits.max_reqs, limits.max_tokens, limits.max_width,
                                  num_groups));
  if (limits.max_tokens > stack.max_tokens())
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: max_tokens {} exceeds the stack's max_tokens {}",
                                  limits.max_tokens, stack.max_tokens()));
  for (int32_t g : layer_group)
    if (g < 0 || g >= num_groups)
      return make_error(errc::invalid_argument,
                        fmt::format("graph_runner: layer group {} outside [0, {})", g, num_groups));
  std::unique_ptr<graph_runner> r(new graph_runner());
  r->stack_ = &stack;
  r->views_ = std::move(views);
  r->layer_group_ = std::move(layer_group);
  r->limits_ = limits;
  r->hidden_ = hidden;
  layout l;
  const auto reqs = static_cast<size_t>(limits.max_reqs);
  const auto tokens = static_cast<size_t>(limits.max_tokens);
  const size_t ids_at = l.take<int32_t>(tokens), pos_at = l.take<int32_t>(tokens);
  std::vector<std::array<size_t, 3>> small(static_cast<size_t>(num_groups));
  for (auto& g : small)
    g = {l.take<int32_t>(reqs + 1), l.take<int32_t>(reqs), l.take<int64_t>(tokens)};
  r->small_bytes_ = l.bytes;
  std::vector<size_t> tables;
  for (int32_t g = 0; g < num_groups; ++g)
    tables.push_back(l.take<int32_t>(reqs * static_cast<size_t>(limits.max_width)));
  if (auto e = cudaMalloc(&r->device_, l.bytes); e != cudaSuccess)
    return cuda_error(e, "graph_runner: cudaMalloc");
  if (auto e = cudaMallocHost(&r->host_, l.bytes); e != cudaSuccess)
    return cuda_error(e, "graph_runner: cudaMallocHost");
  std::memset(r->host_, 0, l.bytes);
  r->buffer_bytes_ = static_cast<int64_t>(l.bytes);
  auto* base = static_cast<std::byte*>(r->device_);
  r->ids_ = reinterpret_cast<int32_t*>(base + ids_at);
  r->positions_ = reinterpret_cast<int32_t*>(base + pos_at);
  for (size_t g = 0; g < small.size(); ++g)
    r->groups_.push_back({reinterpret_cast<int32_t*>(base + small[g][0]),
                          reinterpret_cast<int32_t*>(base + small[g][1]),
                          reinterpret_cast<int64_t*>(base + small[g][2]),
                          reinterpret_cast<int32_t*>(base + tables[g])});
  // Every token padding (slot -1), every request padding (one token, seq_len 0): a step over
  // the buffers as they start writes nothing.
  auto* host = static_cast<std::byte*>(r->host_);
  for (size_t g = 0; g < small.size(); ++g) {
    auto* qsl = reinterpret_cast<int32_t*>(host + small[g][0]);
    for (size_t i = 0; i <= reqs; ++i)
      qsl[i] = static_cast<int32_t>(std::min(i, tokens));
    std::fill_n(reinterpret_cast<int64_t*>(host + small[g][2]), tokens, int64_t{-1});
  }
  if (auto e = cudaMemcpy(r->device_, r->host_, l.bytes, cudaMemcpyHostToDevice); e != cudaSuccess)
    return cuda_error(e, "graph_runner: initial copy");
  return r;
}

graph_runner::~graph_runner() {
  full_.clear();
  piecewise_.clear();
  if (host_) cudaFreeHost(host_);
  if (device_) cudaFree(device_);
}

status graph_runner::stage(const step_batch& b, const std::vector<const backend_metadata*>& groups,
                           int32_t tokens, int32_t reqs) {
  const int32_t n = b.num_reqs();
  const int32_t t = b.num_tokens();
  if (reqs < n || tokens < t || reqs > limits_.max_reqs || tokens > limits_.max_tokens
      || tokens - t < reqs - n)
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: {} requests / {} tokens do not pad to {} / {} "
                                  "(at most {} / {})",
                                  n, t, reqs, tokens, limits_.max_reqs, limits_.max_tokens));
  if (groups.size() != groups_.size())
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: {} metadata groups for {} buffers", groups.size(),
                                  groups_.size()));
  int32_t width = 1;
  for (const auto* g : groups) {
    const auto& m = g->common;
    if (m.block_table_width > limits_.max_width)
      return make_error(errc::invalid_argument,
                        fmt::format("graph_runner: block-table width {} exceeds {}",
                                    m.block_table_width, limits_.max_width));
    if (m.num_reqs != n || static_cast<int32_t>(m.query_start_loc.size()) != n + 1
        || static_cast<int32_t>(m.slot_mapping.size()) < t)
      return make_error(
          errc::invalid_argument,
          fmt::format("graph_runner: metadata of {} requests for a batch of {}", m.num_reqs, n));
    width = std::max(width, m.block_table_width);
  }
  // Host mirror at the device offsets.
  auto* host = static_cast<std::byte*>(host_);
  auto* dev = static_cast<std::byte*>(device_);
  auto mirror = [&](auto* device_ptr) {
    using T = std::remove_pointer_t<decltype(device_ptr)>;
    return reinterpret_cast<T*>(host + (reinterpret_cast<std::byte*>(device_ptr) - dev));
  };
  int32_t* ids = mirror(ids_);
  int32_t* pos = mirror(positions_);
  for (int32_t i = 0; i < tokens; ++i) {
    ids[i] = i < t ? b.token_ids[static_cast<size_t>(i)] : 0;
    pos[i] = i < t ? static_cast<int32_t>(b.positions[static_cast<size_t>(i)]) : 0;
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& m = groups[g]->common;
    int32_t* qsl = mirror(groups_[g].qsl);
    int32_t* seq = mirror(groups_[g].seq_lens);
    int64_t* slots = mirror(groups_[g].slots);
    int32_t* table = mirror(groups_[g].table);
    for (int32_t i = 0; i <= n; ++i)
      qsl[i] = m.query_start_loc[static_cast<size_t>(i)];
    for (int32_t i = n; i < reqs; ++i) // a padded request: one padded token
      qsl[i + 1] = qsl[i] + 1;
    for (int32_t i = 0; i < reqs; ++i)
      seq[i] = i < n ? m.seq_lens[static_cast<size_t>(i)] : 0;
    for (int32_t i = 0; i < tokens; ++i)
      slots[i] = i < t ? m.slot_mapping[static_cast<size_t>(i)] : -1;
    for (int32_t i = 0; i < reqs; ++i) {
      int32_t* row = table + static_cast<int64_t>(i) * limits_.max_width;
      std::fill(row, row + width, 0);
      if (i < n) {
        auto src = m.block_table_row(i);
        std::copy(src.begin(), src.end(), row);
      }
    }
  }
  const cudaStream_t stream = stack_->stream();
  if (auto e = cudaMemcpyAsync(device_, host_, small_bytes_, cudaMemcpyHostToDevice, stream);
      e != cudaSuccess)
    return cuda_error(e, "graph_runner: staging copy");
  const size_t pitch = static_cast<size_t>(limits_.max_width) * sizeof(int32_t);
  for (const auto& g : groups_)
    if (auto e = cudaMemcpy2DAsync(g.table, pitch, mirror(g.table), pitch,
                                   static_cast<size_t>(width) * sizeof(int32_t),
                                   static_cast<size_t>(reqs), cudaMemcpyHostToDevice, stream);
        e != cudaSuccess)
      return cuda_error(e, "graph_runner: block-table copy");
  return ok();
}

std::function<kernels::cuda_status(float*, size_t)> graph_runner::reducer() {
  if (!comm_) return {};
  return [this](float* buf, size_t n) -> kernels::cuda_status {
    try {
      comm_->all_reduce(buf, n, comm::reduce_op::sum, stack_->stream());
      return {};
    } catch (const comm::collective_error& e) {
      return kernels::cuda_status::failure(cudaErrorUnknown, e.what());
    }
  };
}

status graph_runner::launched(const std::vector<comm::collective_record>& collectives) {
  if (!comm_ || collectives.empty()) return ok();
  try {
    comm_->replayed(collectives, stack_->stream());
    return ok();
  } catch (const comm::collective_error& e) {
    return make_error(errc::collective_failed, e.what());
  }
}

kernels::device_step graph_runner::step_for(int32_t tokens, int32_t reqs, bool decodes_only) const {
  kernels::device_step s;
  s.token_ids = ids_;
  s.positions = positions_;
  s.num_tokens = tokens;
  s.max_query_len = decodes_only ? 1 : 0;
  for (int32_t g : layer_group_) {
    const auto& b = groups_[static_cast<size_t>(g)];
    s.layers.push_back({b.qsl, b.seq_lens, b.table, b.slots, limits_.max_width, reqs});
  }
  return s;
}

void graph_runner::drop(const batch_descriptor& graph) {
  if (graph.mode == cudagraph_mode::full) full_.erase(graph.num_reqs);
  if (graph.mode == cudagraph_mode::piecewise) piecewise_.erase(graph.num_tokens);
}

bool graph_runner::captured(const batch_descriptor& graph) const {
  if (graph.mode == cudagraph_mode::full) return full_.count(graph.num_reqs) > 0;
  if (graph.mode == cudagraph_mode::piecewise) return piecewise_.count(graph.num_tokens) > 0;
  return false;
}

status graph_runner::capture(const batch_descriptor& graph) {
  if (captured(graph)) return ok();
  const bool full = graph.mode == cudagraph_mode::full;
  if (!full && graph.mode != cudagraph_mode::piecewise)
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: mode {} is not a graph", to_string(graph.mode)));
  if (full && (graph.num_reqs != graph.num_tokens || graph.num_reqs > limits_.max_reqs))
    return make_error(errc::unsupported,
                      fmt::format("graph_runner: a FULL graph of {} requests / {} tokens (FULL "
                                  "graphs serve uniform one-token decode, at most {} requests)",
                                  graph.num_reqs, graph.num_tokens, limits_.max_reqs));
  if (graph.num_tokens <= 0 || graph.num_tokens > limits_.max_tokens)
    return make_error(errc::invalid_argument, fmt::format("graph_runner: {} tokens outside [1, {}]",
                                                          graph.num_tokens, limits_.max_tokens));
  auto failed = [&](const kernels::cuda_status& s) {
    return make_error(errc::io_error,
                      fmt::format("capturing the {} graph of {} tokens: {}", to_string(graph.mode),
                                  graph.num_tokens, s.message()));
  };
  // Nothing captured before belongs to this graph (a failed capture may leave some behind).
  if (comm_) comm_->take_captured();
  if (full) {
    auto g = kernels::stack_graph::capture(
        *stack_, step_for(graph.num_tokens, graph.num_reqs, true), views_, hidden_, reducer());
    if (!g.status) return failed(g.status);
    full_[graph.num_reqs] = {std::move(g.graph), comm_ ? comm_->take_captured()
                                                       : std::vector<comm::collective_record>{}};
  } else {
    auto g = kernels::piecewise_graph::capture(*stack_, step_for(graph.num_tokens, 1), hidden_,
                                               reducer());
    if (!g.status) return failed(g.status);
    piecewise_[graph.num_tokens] = {std::move(g.graph),
                                    comm_ ? comm_->take_captured()
                                          : std::vector<comm::collective_record>{}};
  }
  return ok();
}

status graph_runner::replay(const batch_descriptor& graph, int32_t reqs) {
  if (!captured(graph))
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: no {} graph of {} tokens captured",
                                  to_string(graph.mode), graph.num_tokens));
  kernels::cuda_status st;
  const std::vector<comm::collective_record>* collectives = nullptr;
  if (graph.mode == cudagraph_mode::full) {
    const auto& g = full_.at(graph.num_reqs);
    if (comm_) comm_->before_replay(g.collectives);
    st = g.graph->replay();
    collectives = &g.collectives;
  } else {
    // The rows keep their max_width stride: the attention reads them at that pitch.
    const auto& g = piecewise_.at(graph.num_tokens);
    if (comm_) comm_->before_replay(g.collectives);
    st = g.graph->replay(step_for(graph.num_tokens, reqs), views_);
    collectives = &g.collectives;
  }
  if (!st) return make_error(errc::io_error, st.message());
  return launched(*collectives);
}

status graph_runner::forward_eager(const batch_descriptor& graph, int32_t reqs) {
  const bool full = graph.mode == cudagraph_mode::full;
  if (auto st = stack_->forward(step_for(graph.num_tokens, reqs, full), views_, reducer(), hidden_);
      !st)
    return make_error(errc::io_error, st.message());
  return ok();
}

int64_t graph_runner::graph_bytes(const batch_descriptor& graph) const {
  if (graph.mode == cudagraph_mode::full) {
    auto it = full_.find(graph.num_reqs);
    return it == full_.end() ? 0 : it->second.graph->bytes();
  }
  auto it = piecewise_.find(graph.num_tokens);
  return it == piecewise_.end() ? 0 : it->second.graph->bytes();
}

int64_t graph_runner::graph_bytes() const {
  int64_t total = 0;
  for (const auto& [n, g] : full_)
    total += g.graph->bytes();
  for (const auto& [n, g] : piecewise_)
    total += g.graph->bytes();
  return total;
}

} // namespace kvactor
