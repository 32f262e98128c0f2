#include "actors/rank/graph_runner.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

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

expected<std::unique_ptr<graph_runner>> graph_runner::create(kernels::attention_stack_cuda& stack,
                                                             std::vector<kernels::kv_view> views,
                                                             std::vector<int32_t> layer_group,
                                                             int32_t num_groups, int32_t max_reqs,
                                                             int32_t max_width, float* hidden) {
  if (max_reqs <= 0 || max_width <= 0 || num_groups <= 0)
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: max_reqs {}, max_width {}, groups {}: must be "
                                  "positive",
                                  max_reqs, max_width, num_groups));
  if (max_reqs > stack.max_tokens())
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: max_reqs {} exceeds the stack's max_tokens {}",
                                  max_reqs, stack.max_tokens()));
  std::unique_ptr<graph_runner> r(new graph_runner());
  r->stack_ = &stack;
  r->views_ = std::move(views);
  r->layer_group_ = std::move(layer_group);
  r->max_reqs_ = max_reqs;
  r->max_width_ = max_width;
  r->hidden_ = hidden;
  layout l;
  const auto n = static_cast<size_t>(max_reqs);
  const size_t ids_at = l.take<int32_t>(n), pos_at = l.take<int32_t>(n);
  std::vector<std::array<size_t, 4>> at(static_cast<size_t>(num_groups));
  for (auto& g : at)
    g = {l.take<int32_t>(n + 1), l.take<int32_t>(n),
         l.take<int32_t>(n * static_cast<size_t>(max_width)), l.take<int64_t>(n)};
  if (auto e = cudaMalloc(&r->device_, l.bytes); e != cudaSuccess)
    return cuda_error(e, "graph_runner: cudaMalloc");
  if (auto e = cudaMallocHost(&r->host_, l.bytes); e != cudaSuccess)
    return cuda_error(e, "graph_runner: cudaMallocHost");
  std::memset(r->host_, 0, l.bytes);
  r->buffer_bytes_ = static_cast<int64_t>(l.bytes);
  auto* base = static_cast<std::byte*>(r->device_);
  r->ids_ = reinterpret_cast<int32_t*>(base + ids_at);
  r->positions_ = reinterpret_cast<int32_t*>(base + pos_at);
  for (const auto& g : at)
    r->groups_.push_back(
        {reinterpret_cast<int32_t*>(base + g[0]), reinterpret_cast<int32_t*>(base + g[1]),
         reinterpret_cast<int32_t*>(base + g[2]), reinterpret_cast<int64_t*>(base + g[3])});
  if (auto e = cudaMemset(r->device_, 0, l.bytes); e != cudaSuccess)
    return cuda_error(e, "graph_runner: cudaMemset");
  return r;
}

graph_runner::~graph_runner() {
  graphs_.clear();
  if (host_) cudaFreeHost(host_);
  if (device_) cudaFree(device_);
}

status graph_runner::stage(const step_batch& b, const std::vector<const backend_metadata*>& groups,
                           int32_t padded) {
  const int32_t n = b.num_reqs();
  if (n > padded || padded > max_reqs_ || b.num_tokens() != n)
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: {} requests / {} tokens do not fit a uniform "
                                  "decode graph of {} (at most {})",
                                  n, b.num_tokens(), padded, max_reqs_));
  if (groups.size() != groups_.size())
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: {} metadata groups for {} buffers", groups.size(),
                                  groups_.size()));
  // Host mirror at the device offsets, then one copy of the whole buffer.
  auto* host = static_cast<std::byte*>(host_);
  auto* dev = static_cast<std::byte*>(device_);
  auto mirror = [&](auto* device_ptr) {
    using T = std::remove_pointer_t<decltype(device_ptr)>;
    return reinterpret_cast<T*>(host + (reinterpret_cast<std::byte*>(device_ptr) - dev));
  };
  int32_t* ids = mirror(ids_);
  int32_t* pos = mirror(positions_);
  for (int32_t i = 0; i < padded; ++i) {
    ids[i] = i < n ? b.token_ids[static_cast<size_t>(i)] : 0;
    pos[i] = i < n ? static_cast<int32_t>(b.positions[static_cast<size_t>(i)]) : 0;
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& m = groups[g]->common;
    if (m.block_table_width > max_width_)
      return make_error(errc::invalid_argument,
                        fmt::format("graph_runner: block-table width {} exceeds {}",
                                    m.block_table_width, max_width_));
    int32_t* qsl = mirror(groups_[g].qsl);
    int32_t* seq = mirror(groups_[g].seq_lens);
    int32_t* table = mirror(groups_[g].table);
    int64_t* slots = mirror(groups_[g].slots);
    for (int32_t i = 0; i <= padded; ++i)
      qsl[i] = i;
    for (int32_t i = 0; i < padded; ++i) {
      seq[i] = i < n ? m.seq_lens[static_cast<size_t>(i)] : 0;
      slots[i] = i < n ? m.slot_mapping[static_cast<size_t>(i)] : -1;
      int32_t* row = table + static_cast<int64_t>(i) * max_width_;
      std::fill(row, row + max_width_, 0);
      if (i < n) {
        auto src = m.block_table_row(i);
        std::copy(src.begin(), src.end(), row);
      }
    }
  }
  if (auto e = cudaMemcpyAsync(device_, host_, static_cast<size_t>(buffer_bytes_),
                               cudaMemcpyHostToDevice, stack_->stream());
      e != cudaSuccess)
    return cuda_error(e, "graph_runner: staging copy");
  return ok();
}

kernels::device_step graph_runner::step_for(int32_t padded) const {
  kernels::device_step s;
  s.token_ids = ids_;
  s.positions = positions_;
  s.num_tokens = padded;
  for (int32_t g : layer_group_) {
    const auto& b = groups_[static_cast<size_t>(g)];
    s.layers.push_back({b.qsl, b.seq_lens, b.table, b.slots, max_width_, padded});
  }
  return s;
}

status graph_runner::capture(int32_t padded) {
  if (captured(padded)) return ok();
  auto g = kernels::stack_graph::capture(*stack_, step_for(padded), views_, hidden_);
  if (!g.status)
    return make_error(errc::io_error, fmt::format("capturing the graph of {} requests: {}", padded,
                                                  g.status.message()));
  graphs_[padded] = std::move(g.graph);
  return ok();
}

status graph_runner::replay(int32_t padded) {
  auto it = graphs_.find(padded);
  if (it == graphs_.end())
    return make_error(errc::invalid_argument,
                      fmt::format("graph_runner: no graph of {} requests captured", padded));
  if (auto st = it->second->replay(); !st) return make_error(errc::io_error, st.message());
  return ok();
}

int64_t graph_runner::graph_bytes() const {
  int64_t total = 0;
  for (const auto& [size, g] : graphs_)
    total += g->bytes();
  return total;
}

} // namespace kvactor
