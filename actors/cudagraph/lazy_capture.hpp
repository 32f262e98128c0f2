// Lazy CUDA graph capture: serve eagerly from the first step, and capture between
// steps the graphs that the traffic actually wants, most wanted first, under a memory cap.
// Pure C++, no CAF, no CUDA: the graph manager asks it what to capture next and tells it what
// each capture cost; it builds the dispatcher over what is captured so far.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "actors/cudagraph/dispatcher.hpp"
#include "messages/cudagraph.hpp"

namespace kvactor {

/// Which graph next() offers: the most wanted one (lazy), or the plan's next (at start-up: its
/// FULL graphs, then its PIECEWISE ones, each largest first).
enum class capture_order : uint8_t { as_seen, planned };

class lazy_capture {
public:
  /// `plan`: every graph the eager-capture mode would capture (full and piecewise);
  /// `memory_cap`: bytes all captured graphs may hold together (0 = none may be captured).
  /// REQUIRES: max_num_seqs > 0.
  lazy_capture(cudagraph_plan plan, int32_t max_num_seqs, int64_t memory_cap,
               capture_order order = capture_order::as_seen);

  /// Records one step's batch: the graph the full plan would replay it with (the dispatcher
  /// over every planned graph) is wanted once more. Batches no graph serves count for nothing.
  void observe(int32_t num_reqs, int32_t num_tokens, int32_t uniform_token_count,
               int32_t max_query_len = 0, int32_t num_ubatches = 1);

  /// The wanted, not yet captured graph to capture next: most observations first, then the
  /// earliest seen (planned order: the plan's next); nothing when all wanted graphs are captured
  /// or the next one would not fit (its estimate: the largest capture so far, as graphs of one
  /// plan cost alike).
  std::optional<batch_descriptor> next() const;

  /// A capture finished and holds `bytes`; the dispatcher now replays it.
  void captured(const batch_descriptor& graph, int64_t bytes);

  /// A capture failed or would exceed the cap: the graph stays eager and is not offered again.
  void skip(const batch_descriptor& graph);

  /// What a batch runs with now: a captured graph, or eager.
  batch_descriptor dispatch(int32_t num_reqs, int32_t num_tokens, int32_t uniform_token_count,
                            int32_t max_query_len = 0, int32_t num_ubatches = 1) const;

  /// Graphs of the plan (FULL and PIECEWISE).
  size_t planned() const { return plan_.full_graphs.size() + plan_.piecewise_graphs.size(); }
  int64_t memory_used() const { return used_; }
  int64_t memory_cap() const { return cap_; }
  const std::vector<batch_descriptor>& captured_graphs() const { return captured_; }
  const std::vector<batch_descriptor>& skipped_graphs() const { return skipped_; }

private:
  struct wanted {
    batch_descriptor graph;
    int64_t count = 0;
    int64_t first_seen = 0;
  };
  void rebuild();

  cudagraph_plan plan_;
  int32_t max_num_seqs_;
  int64_t cap_;
  capture_order order_;
  graph_dispatcher all_;     // every planned graph: what each batch wants
  graph_dispatcher current_; // the captured ones
  std::vector<wanted> wanted_;
  std::vector<batch_descriptor> captured_;
  std::vector<batch_descriptor> skipped_;
  int64_t used_ = 0;
  int64_t largest_ = 0; // the largest single capture so far (the estimate for the next)
  int64_t steps_ = 0;
};

} // namespace kvactor
