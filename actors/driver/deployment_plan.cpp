#include "actors/driver/deployment_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "actors/cudagraph/planner.hpp"
#include "actors/driver/kv_budget.hpp"
#include "actors/kv_cache/allocation.hpp"
#include "actors/registry/assignment.hpp"
#include "messages/limits.hpp"

namespace kvactor {

namespace {

error invalid(std::string msg) {
  return make_error(errc::invalid_argument, std::move(msg));
}

status validate(const plan_request& r) {
  // The ranges `kvactor plan` checked its flags against; a plan_request may come from elsewhere.
  if (auto ok = check_settings({{limits::block_size, r.block_size},
                                {limits::max_model_len, r.max_model_len},
                                {limits::max_num_seqs, r.max_num_seqs},
                                {limits::max_num_batched_tokens, r.max_num_batched_tokens},
                                {limits::num_gpu_blocks_override, r.num_gpu_blocks_override}},
                               named_as::flag);
      !ok)
    return ok;
  if (r.num_speculative_tokens < 0)
    return invalid(
        fmt::format("--num-speculative-tokens: {} is negative", r.num_speculative_tokens));
  const auto& b = r.budget;
  if (!b.kv_cache_memory.empty() && b.gpu_memory > 0)
    return invalid("--kv-cache-memory and --gpu-memory: give one way to size the budget, not both");
  for (auto v : b.kv_cache_memory)
    if (v <= 0)
      return make_error(errc::insufficient_memory,
                        fmt::format("--kv-cache-memory: {} bytes leaves no memory for the cache "
                                    "blocks; give a positive size",
                                    v));
  if (b.gpu_memory < 0) return invalid(fmt::format("--gpu-memory: {} is negative", b.gpu_memory));
  if (!(b.gpu_memory_utilization > 0.0 && b.gpu_memory_utilization <= 1.0))
    return invalid(
        fmt::format("--gpu-memory-utilization: {} is not in (0, 1]", b.gpu_memory_utilization));
  if (b.weights_memory < 0)
    return invalid(fmt::format("--weights-memory: {} is negative", b.weights_memory));
  if (b.kv_cache_memory.empty() && b.gpu_memory == 0 && r.num_gpu_blocks_override == 0)
    return invalid("budget: give --kv-cache-memory, or --gpu-memory (with "
                   "--gpu-memory-utilization and --weights-memory), or --num-gpu-blocks-override");
  return ok();
}

expected<std::vector<int64_t>> available_per_rank(const plan_request& r, size_t ranks) {
  const auto& b = r.budget;
  if (!b.kv_cache_memory.empty()) return per_rank_budgets(b.kv_cache_memory, ranks);
  if (b.gpu_memory > 0) {
    // The rule `kvactor run` applies to the GPU it measures, here on the GPU the flags describe.
    auto avail = gpu_kv_cache_budget({b.gpu_memory, b.gpu_memory_utilization, 0, b.weights_memory});
    if (!avail) return avail.err();
    return std::vector<int64_t>(ranks, *avail);
  }
  return std::vector<int64_t>(ranks, 0); // sized by the block override
}

// The model file and its layout on every rank.
status load_ranks(deployment_plan& plan) {
  auto path = resolve_model_path(plan.request.model);
  if (!path) return path.err();
  plan.model_path = *path;
  auto ranks = load_model(*path, plan.request.load);
  if (!ranks) return ranks.err();
  plan.ranks = std::move(*ranks);
  return ok();
}

// Limits: max_model_len defaults to what the model was trained for, and may not exceed it.
status resolve_limits(deployment_plan& plan) {
  const auto& model = plan.ranks.front();
  auto& req = plan.request;
  if (req.max_model_len == 0) req.max_model_len = model.max_position_embeddings;
  if (model.max_position_embeddings > 0 && req.max_model_len > model.max_position_embeddings)
    return invalid(fmt::format("--max-model-len: {} exceeds the model's maximum of {} tokens "
                               "(max_position_embeddings)",
                               req.max_model_len, model.max_position_embeddings));
  if (req.max_model_len <= 0)
    return invalid("--max-model-len: the model config gives no length; set --max-model-len");
  plan.limits.max_model_len = req.max_model_len;
  plan.limits.max_in_flight_tokens = req.max_num_batched_tokens;
  plan.limits.max_encoder_input_tokens = model.max_encoder_input_tokens;
  return ok();
}

// Specs per rank, then one KV cache plan with the minimum block count over ranks. The whole
// kv_plan is returned: the per-rank summaries quote it.
expected<kv_plan> plan_kv_cache_per_rank(deployment_plan& plan, const spec_options& sopt) {
  const auto& req = plan.request;
  std::vector<layer_spec_list> specs;
  for (const auto& r : plan.ranks)
    specs.push_back(kv_cache_specs(r.layers, sopt));
  auto available = available_per_rank(req, plan.ranks.size());
  if (!available) return available.err();
  kv_plan_options kopt;
  kopt.limits = plan.limits;
  take<cache_settings>(kopt, req);
  kopt.layout = req.layout;
  kopt.grouping.disable_hybrid = req.disable_hybrid_kv_cache_manager;
  kopt.grouping.allow_chunked_local_hybrid = req.allow_chunked_local_attn_with_hybrid_kv_cache;
  auto kv = plan_kv_cache(specs, *available, kopt);
  if (!kv) return kv.err();
  plan.warnings = kv->warnings;
  plan.config = kv->per_rank.front();
  plan.bytes_per_block = bytes_per_block(plan.config.groups);
  plan.capacity = kv_capacity(plan.config, plan.limits);
  return kv;
}

// Groups as the rank sees them, then backends, attention groups and kernel block sizes.
status plan_groups_and_backends(deployment_plan& plan, const spec_options& sopt) {
  const auto& model = plan.ranks.front();
  const auto& req = plan.request;
  plan.kv_sharing = shared_kv_cache_layers(model.layers);
  auto groups = rank_groups(plan.config, model.layers, sopt);
  if (!groups) return groups.err();
  plan.groups = std::move(*groups);
  plan.fast_prefill_layers =
      fast_prefill_eligible_layers(model.layers, req.kv_sharing_fast_prefill);
  auto assignment = assign_backends(backend_registry::with_builtins(), model, plan.groups,
                                    req.device, req.attention_backend);
  if (!assignment) return assignment.err();
  plan.attention_groups = std::move(assignment->attention_groups);
  plan.kernel_block_sizes = std::move(assignment->kernel_block_sizes);
  plan.graph_support = assignment->support;
  plan.query_lens_mismatch_backend = assignment->query_lens_mismatch_backend;
  return ok();
}

// CUDA graphs: a CPU device has none to capture.
status plan_graphs(deployment_plan& plan) {
  const auto& req = plan.request;
  cudagraph_options copt;
  copt.requested = req.device == device_kind::cpu ? cudagraph_mode::none : req.cudagraph;
  copt.support = plan.graph_support;
  copt.uniform_decode_query_len = 1 + req.num_speculative_tokens;
  take<scheduler_limits>(copt, req);
  copt.capture_sizes = req.cudagraph_capture_sizes;
  copt.has_mamba = std::any_of(plan.groups.begin(), plan.groups.end(), [](const auto& g) {
    return group_kind(g.spec) == kv_cache_spec_kind::mamba;
  });
  copt.num_blocks = plan.config.num_blocks;
  auto graphs = plan_cudagraphs(copt);
  if (!graphs) return graphs.err();
  plan.cudagraphs = std::move(*graphs);
  plan.cudagraphs.requested = req.cudagraph;
  if (req.device == device_kind::cpu && req.cudagraph != cudagraph_mode::none)
    plan.cudagraphs.notes.insert(plan.cudagraphs.notes.begin(),
                                 "cpu device: CUDA graphs need a GPU, every step runs eagerly");
  return ok();
}

// Per-layer views over the one backing allocation; sharing layers alias their target.
status plan_views(deployment_plan& plan) {
  auto views = build_views(plan.config, plan.groups, plan.kernel_block_sizes, plan.kv_sharing);
  if (!views) return views.err();
  plan.views = std::move(*views);
  return ok();
}

// Each rank's heads (those of its first non-Mamba layer) and the blocks its budget allowed before
// the minimum over ranks was taken.
std::vector<rank_summary> rank_summaries(const deployment_plan& plan, const kv_plan& kv) {
  std::vector<rank_summary> out;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    rank_summary s;
    s.rank = static_cast<int32_t>(r);
    for (const auto& l : plan.ranks[r].layers)
      if (l.kind != layer_kind::mamba) {
        s.num_heads = l.num_heads;
        s.num_kv_heads = l.num_kv_heads;
        break;
      }
    s.available_bytes = kv.available_per_rank[r];
    s.planned_blocks = kv.planned_blocks[r];
    s.num_blocks = kv.per_rank[r].num_blocks;
    out.push_back(s);
  }
  return out;
}

} // namespace

int32_t attention_block_size(const deployment_plan& plan) {
  for (const auto& g : plan.groups) {
    auto k = group_kind(g.spec);
    if (k != kv_cache_spec_kind::mamba && k != kv_cache_spec_kind::encoder_only)
      return g.spec.block_size;
  }
  return plan.request.block_size;
}

expected<deployment_plan> plan_deployment(const plan_request& request) {
  if (auto v = validate(request); !v) return v.err();
  deployment_plan plan;
  plan.request = request;
  if (auto s = load_ranks(plan); !s) return s.err();
  if (auto s = resolve_limits(plan); !s) return s.err();
  spec_options sopt;
  take<cache_settings>(sopt, plan.request);
  take<scheduler_limits>(sopt, plan.request);
  auto kv = plan_kv_cache_per_rank(plan, sopt);
  if (!kv) return kv.err();
  if (auto s = plan_groups_and_backends(plan, sopt); !s) return s.err();
  if (auto s = plan_graphs(plan); !s) return s.err();
  if (auto s = plan_views(plan); !s) return s.err();
  plan.per_rank = rank_summaries(plan, *kv);
  return plan;
}

} // namespace kvactor
