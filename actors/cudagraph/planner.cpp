#include "actors/cudagraph/planner.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace kvactor {

namespace {

bool weaker(graph_support a, graph_support b) {
  return static_cast<uint8_t>(a) < static_cast<uint8_t>(b);
}

std::string backend_name(const graph_support_info& s) {
  return s.backend.empty() ? std::string{"(unnamed)"} : s.backend;
}

// Moves the plan to mode `to` and records why, as "<from> -> <to>: <why>".
void change_mode(cudagraph_plan& plan, cudagraph_mode to, const std::string& why) {
  plan.notes.push_back(fmt::format("{} -> {}: {}", to_string(plan.mode), to_string(to), why));
  plan.mode = to;
}

status validate(const cudagraph_options& opt) {
  auto positive = [](std::string_view flag, int64_t v) -> status {
    if (v > 0) return ok();
    return make_error(errc::invalid_argument, fmt::format("{}: {} is not positive", flag, v));
  };
  if (auto s = positive("--max-num-seqs", opt.max_num_seqs); !s) return s;
  if (auto s = positive("--max-num-batched-tokens", opt.max_num_batched_tokens); !s) return s;
  return positive("uniform_decode_query_len", opt.uniform_decode_query_len);
}

// docs/vllm-semantics.md §7.3 steps 1-5: weaken the requested mode until the weakest attention
// backend can serve it.
status resolve_mode(const cudagraph_options& opt, cudagraph_plan& plan) {
  plan.mode = opt.requested;
  if (plan.mode == cudagraph_mode::none) return ok();
  auto support = opt.support.min_support;
  auto name = backend_name(opt.support);
  auto q = opt.uniform_decode_query_len;
  // Step 2: FULL mixed graphs need a backend that handles any batch shape.
  if (mixed_mode(plan.mode) == cudagraph_mode::full && support != graph_support::always) {
    if (support == graph_support::never)
      return make_error(errc::unsupported,
                        fmt::format("--cudagraph-mode {}: attention backend '{}' does not "
                                    "support CUDA graphs; please try --cudagraph-mode piecewise",
                                    to_string(plan.mode), name));
    // Without attention splitting piecewise graphs would swallow attention whole, which the
    // backend cannot replay for mixed batches either; then only decode batches get graphs.
    auto to = opt.attention_splitting ? cudagraph_mode::full_and_piecewise
                                      : cudagraph_mode::full_decode_only;
    change_mode(plan, to,
                fmt::format("backend '{}' supports {}, not always", name, to_string(support)));
  }
  // Step 3: no FULL graphs at all; piecewise graphs keep attention outside, if it is split.
  if (decode_mode(plan.mode) == cudagraph_mode::full && support == graph_support::never) {
    auto to = opt.attention_splitting ? cudagraph_mode::piecewise : cudagraph_mode::none;
    change_mode(plan, to,
                fmt::format("backend '{}' does not support CUDA graphs{}", name,
                            opt.attention_splitting ? "" : " and attention is not split"));
  }
  // Step 4: spec-decode batches (q > 1 tokens per request) are uniform but not single-token.
  if (decode_mode(plan.mode) == cudagraph_mode::full && q > 1
      && weaker(support, graph_support::uniform_batch)) {
    auto to = opt.attention_splitting ? cudagraph_mode::piecewise : cudagraph_mode::none;
    change_mode(plan, to,
                fmt::format("backend '{}' supports {}, but {} tokens per decode request need "
                            "uniform_batch",
                            name, to_string(support), q));
  }
  // Step 5: a guard; steps 2-3 already removed every FULL graph a 'never' backend would meet.
  if (has_full_cudagraphs(plan.mode) && support == graph_support::never)
    return make_error(errc::unsupported,
                      fmt::format("--cudagraph-mode {}: attention backend '{}' does not support "
                                  "CUDA graphs",
                                  to_string(plan.mode), name));
  return ok();
}

// §7.3 step 7: every request of a captured FULL batch holds one Mamba state block.
status check_mamba(const cudagraph_options& opt, cudagraph_mode mode) {
  // num_blocks 0 means the KV cache is not sized yet (profiling); vLLM skips the check then too.
  if (!opt.has_mamba || !has_full_cudagraphs(mode) || opt.num_blocks <= 0
      || opt.max_num_seqs <= opt.num_blocks)
    return ok();
  return make_error(errc::invalid_argument,
                    fmt::format("max_num_seqs ({}) exceeds available Mamba cache blocks ({}); "
                                "lower --max-num-seqs to at most {} or use --cudagraph-mode "
                                "piecewise",
                                opt.max_num_seqs, opt.num_blocks, opt.num_blocks));
}

int64_t round_up(int64_t x, int64_t q) {
  return (x + q - 1) / q * q;
}

// §7.5, uniform decode: every request has exactly q tokens, so a graph is keyed by T = R * q.
// NOTE: the capture sizes stay as given and only these descriptors are rounded up to multiples
// of q (§7.3 step 6 would round the sizes themselves). This keeps the piecewise ladder of §10
// case 43 ([1,2,4,8,16,24] with FULL decode at 3,6,9,18,24). No varlen decode graphs
// (adaptive verification) and no DBO twins are planned.
std::vector<batch_descriptor> uniform_decode_graphs(const std::vector<int32_t>& sizes, int32_t q,
                                                    int32_t max_num_seqs) {
  std::vector<batch_descriptor> out;
  int64_t max_decode_tokens = int64_t{max_num_seqs} * q;
  int64_t max_size = sizes.back();
  for (auto s : sizes) {
    auto t = round_up(s, q);
    auto r = t / q;
    if (t > max_decode_tokens || t > max_size || r > max_num_seqs) continue;
    // Sizes ascend and round_up is monotone, so duplicates are adjacent.
    if (!out.empty() && out.back().num_tokens == t) continue;
    batch_descriptor d;
    d.mode = cudagraph_mode::full;
    d.num_tokens = static_cast<int32_t>(t);
    d.num_reqs = static_cast<int32_t>(r);
    d.uniform_token_count = q;
    out.push_back(d);
  }
  return out;
}

// §7.5, mixed: one graph per capture size. PIECEWISE graphs do not pad requests (num_reqs 0);
// FULL graphs bake the request count into attention metadata, so they pad to min(s, max).
std::vector<batch_descriptor> mixed_graphs(const std::vector<int32_t>& sizes, cudagraph_mode mode,
                                           int32_t max_num_seqs) {
  std::vector<batch_descriptor> out;
  for (auto s : sizes) {
    batch_descriptor d;
    d.mode = mode;
    d.num_tokens = s;
    d.num_reqs = mode == cudagraph_mode::full ? std::min(s, max_num_seqs) : 0;
    out.push_back(d);
  }
  return out;
}

void sort_for_capture(std::vector<batch_descriptor>& xs) {
  std::stable_sort(xs.begin(), xs.end(), [](const batch_descriptor& a, const batch_descriptor& b) {
    return a.num_tokens > b.num_tokens;
  });
}

} // namespace

expected<cudagraph_plan> plan_cudagraphs(const cudagraph_options& opt) {
  if (auto s = validate(opt); !s) return s.err();
  std::vector<int32_t> sizes;
  if (opt.capture_sizes.empty()) {
    sizes = default_capture_sizes(opt.max_num_seqs, opt.max_num_batched_tokens,
                                  opt.uniform_decode_query_len);
  } else {
    auto normalized = normalize_capture_sizes(opt.capture_sizes, opt.max_num_batched_tokens);
    if (!normalized) return normalized.err();
    sizes = std::move(*normalized);
  }
  cudagraph_plan plan;
  plan.requested = opt.requested;
  plan.support = opt.support;
  plan.uniform_decode_query_len = opt.uniform_decode_query_len;
  if (auto s = resolve_mode(opt, plan); !s) return s.err();
  if (plan.mode == cudagraph_mode::none) return plan;
  if (sizes.empty()) {
    change_mode(
        plan, cudagraph_mode::none,
        fmt::format("no capture size <= max_num_batched_tokens ({})", opt.max_num_batched_tokens));
    return plan;
  }
  if (auto s = check_mamba(opt, plan.mode); !s) return s.err();
  plan.capture_sizes = std::move(sizes);
  auto decode = decode_mode(plan.mode);
  auto mixed = mixed_mode(plan.mode);
  // Separate routine (a tuple mode): decode batches get their own FULL graphs. With plain FULL
  // the mixed FULL graphs serve decode batches as well.
  if (decode == cudagraph_mode::full && mixed != cudagraph_mode::full)
    plan.full_graphs =
        uniform_decode_graphs(plan.capture_sizes, opt.uniform_decode_query_len, opt.max_num_seqs);
  if (mixed == cudagraph_mode::full)
    plan.full_graphs = mixed_graphs(plan.capture_sizes, mixed, opt.max_num_seqs);
  if (mixed == cudagraph_mode::piecewise)
    plan.piecewise_graphs = mixed_graphs(plan.capture_sizes, mixed, opt.max_num_seqs);
  sort_for_capture(plan.full_graphs);
  sort_for_capture(plan.piecewise_graphs);
  return plan;
}

} // namespace kvactor
