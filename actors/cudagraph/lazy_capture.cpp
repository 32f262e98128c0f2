#include "actors/cudagraph/lazy_capture.hpp"

#include <algorithm>

namespace kvactor {

namespace {

cudagraph_plan only(const cudagraph_plan& plan, const std::vector<batch_descriptor>& keep) {
  auto out = plan;
  auto kept = [&](const batch_descriptor& d) {
    return std::find(keep.begin(), keep.end(), d) != keep.end();
  };
  std::erase_if(out.full_graphs, [&](const batch_descriptor& d) { return !kept(d); });
  std::erase_if(out.piecewise_graphs, [&](const batch_descriptor& d) { return !kept(d); });
  return out;
}

bool contains(const std::vector<batch_descriptor>& xs, const batch_descriptor& d) {
  return std::find(xs.begin(), xs.end(), d) != xs.end();
}

} // namespace

lazy_capture::lazy_capture(cudagraph_plan plan, int32_t max_num_seqs, int64_t memory_cap,
                           capture_order order)
    : plan_(std::move(plan)), max_num_seqs_(max_num_seqs), cap_(std::max<int64_t>(memory_cap, 0)),
      order_(order), all_(plan_, max_num_seqs), current_(only(plan_, {}), max_num_seqs) {}

void lazy_capture::observe(int32_t num_reqs, int32_t num_tokens, int32_t uniform_token_count,
                           int32_t max_query_len, int32_t num_ubatches) {
  ++steps_;
  auto d = all_.dispatch(num_reqs, num_tokens, uniform_token_count, 0, max_query_len, num_ubatches);
  if (d.mode == cudagraph_mode::none) return;
  auto it =
      std::find_if(wanted_.begin(), wanted_.end(), [&](const wanted& w) { return w.graph == d; });
  if (it == wanted_.end())
    wanted_.push_back({d, 1, steps_});
  else
    ++it->count;
}

std::optional<batch_descriptor> lazy_capture::next() const {
  auto open = [&](const batch_descriptor& d) {
    return !contains(captured_, d) && !contains(skipped_, d);
  };
  std::optional<batch_descriptor> pick;
  if (order_ == capture_order::planned) {
    for (const auto* list : {&plan_.full_graphs, &plan_.piecewise_graphs})
      for (const auto& d : *list)
        if (!pick && open(d)) pick = d;
  } else {
    const wanted* best = nullptr;
    for (const auto& w : wanted_) {
      if (!open(w.graph)) continue;
      if (!best || w.count > best->count
          || (w.count == best->count && w.first_seen < best->first_seen))
        best = &w;
    }
    if (best) pick = best->graph;
  }
  if (!pick) return std::nullopt;
  // Unknown before the first capture: the first one is tried whenever any memory is allowed.
  const int64_t estimate = largest_;
  if (cap_ == 0 || used_ + estimate > cap_) return std::nullopt;
  return pick;
}

void lazy_capture::captured(const batch_descriptor& graph, int64_t bytes) {
  if (contains(captured_, graph)) return;
  captured_.push_back(graph);
  used_ += std::max<int64_t>(bytes, 0);
  largest_ = std::max(largest_, bytes);
  rebuild();
}

void lazy_capture::skip(const batch_descriptor& graph) {
  if (!contains(skipped_, graph)) skipped_.push_back(graph);
}

batch_descriptor lazy_capture::dispatch(int32_t num_reqs, int32_t num_tokens,
                                        int32_t uniform_token_count, int32_t max_query_len,
                                        int32_t num_ubatches) const {
  return current_.dispatch(num_reqs, num_tokens, uniform_token_count, 0, max_query_len,
                           num_ubatches);
}

void lazy_capture::rebuild() {
  current_ = graph_dispatcher(only(plan_, captured_), max_num_seqs_);
}

} // namespace kvactor
