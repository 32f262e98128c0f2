#include "actors/rank/actor.hpp"

#include <chrono>
#include <functional>
#include <limits>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/cudagraph/actor.hpp"
#include "actors/kv_cache/actor.hpp"
#include "actors/metadata/ubatch.hpp"
#include "actors/model/loader.hpp"
#include "actors/rank/device_memory.hpp"
#include "actors/rank/executor.hpp"
#include "actors/rank/tensor_parallel.hpp"
#include "actors/rank/workload.hpp"
#include "actors/registry/actor.hpp"
#include "kvactor/kernels/device_runtime.h"
#include "kvactor/kernels/host_communicator.h"
#include "messages/caf_error.hpp"

namespace kvactor {

namespace {

using clock_type = std::chrono::steady_clock;

int64_t since(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t).count();
}

caf::error fail(errc code, std::string message) {
  return to_caf_error(make_error(code, std::move(message)));
}

// The memory ledger of a rank: its KV cache and what its executor holds.
int64_t ledger_bytes(const rank_state& st) {
  int64_t total = 0;
  if (st.allocator)
    for (const auto& e : st.allocator->ledger())
      total += e.bytes;
  if (st.executor)
    for (const auto& e : st.executor->ledger())
      total += e.bytes;
  return total;
}

void record(rank_state& st, std::string phase, clock_type::time_point t, int64_t bytes) {
  phase_timing p{std::move(phase), since(t), bytes};
  spdlog::info("rank {}: {} took {:.1f} ms, holds {} bytes", st.config.rank, p.phase,
               static_cast<double>(p.duration_ns) / 1e6, p.memory_bytes);
  // On a GPU every phase is checked against cudaMemGetInfo: what the device lost since the rank
  // started, against what the ledger accounts for (the rest is the CUDA context and cuBLAS).
  if (st.config.device == "cuda" && st.device_free_at_start > 0)
    if (auto info = kernels::gpu_memory_info()) {
      const int64_t used = st.device_free_at_start - info->first;
      const int64_t ledger = ledger_bytes(st);
      const int64_t gap = used - ledger;
      const auto level = gap > (int64_t{1} << 30) ? spdlog::level::warn : spdlog::level::info;
      spdlog::log(level,
                  "rank {}: after {}: ledger {} bytes, cudaMemGetInfo shows {} bytes used since "
                  "start ({:+} unaccounted)",
                  st.config.rank, p.phase, ledger, used, gap);
    }
  st.phases.push_back(std::move(p));
}

// Runs the step on the rank's executor (CPU or GPU) over every ubatch, then samples.
expected<step_done> execute(rank_state& st, const step_plan& plan, const batch_descriptor& desc) {
  const auto& b = *st.batch;
  step_done done;
  done.seq = plan.seq;
  done.epoch = plan.epoch;
  done.rank = st.config.rank;
  done.executed = desc;
  std::vector<executed_ubatch> ubatches;
  for (const auto& out : st.outputs)
    if (out->seq == plan.seq && out->token_end > out->token_start)
      ubatches.push_back({out->token_start, out->token_end, &out->layers});
  auto tokens = st.executor->run_dispatched(b, ubatches, desc, done.executed);
  if (!tokens) return tokens.err(); // the caller names the step
  for (size_t i = 0; i < tokens->size(); ++i)
    done.sampled.push_back({b.sample_ids[i], (*tokens)[i]});
  return done;
}

// The step protocol without kernels: every sampled request gets token 0.
expected<step_done> protocol_only(rank_state& st, const step_plan& plan,
                                  const batch_descriptor& desc) {
  step_done done{plan.seq, plan.epoch, st.config.rank, {}, {}, desc};
  for (auto id : st.batch->sample_ids)
    done.sampled.push_back({id, 0});
  return done;
}

using rank_self = rank_actor::stateful_pointer<rank_state>;

// The executor's persistent graph inputs, sized for the plan; false (with a note in the plan)
// when this executor cannot replay graphs.
bool prepare_graphs(rank_state& st, cudagraph_plan& plan) {
  if (plan.mode == cudagraph_mode::none || plan.capture_sizes.empty()) return false;
  graph_setup setup;
  setup.layer_group = st.layer_group;
  setup.max_reqs = st.config.max_num_seqs;
  setup.max_tokens = plan.capture_sizes.back();
  for (int32_t w : st.steps.widths())
    setup.max_width = std::max(setup.max_width, w);
  if (auto ok = st.executor->prepare_graphs(setup); !ok) {
    spdlog::warn("rank {}: {}", st.config.rank, ok.err().message);
    plan.notes.push_back(ok.err().message);
    return false;
  }
  st.graphs_planned = plan.full_graphs.size() + plan.piecewise_graphs.size();
  return true;
}

// Captures the graph the graph manager offers next and reports how it went; with `until_done`
// goes on until nothing is offered (start-up), else stops after one (lazy: one per step).
void capture_graphs(rank_self self, bool until_done, clock_type::time_point started,
                    std::function<void(caf::error)> done) {
  auto& st = self->state;
  self->request(st.graphs, caf::infinite, atom::capture_v)
      .then(
          [self, until_done, started, done](std::vector<batch_descriptor>& next) mutable {
            auto& st = self->state;
            if (next.empty()) {
              done({});
              return;
            }
            cudagraph_captured c;
            c.graph = next.front();
            if (auto r = st.executor->capture(c.graph)) {
              c.bytes = r->bytes;
              c.duration_ns = r->duration_ns;
            } else {
              c.error = r.err().message;
              ++st.graphs_failed;
              spdlog::warn("rank {}: {} graph of {} tokens stays eager: {}", st.config.rank,
                           to_string(c.graph.mode), c.graph.num_tokens, c.error);
            }
            ++st.graphs_tried;
            if (st.recorder) st.recorder->record(st.trace_name, st.graphs_trace_name, c);
            self->request(st.graphs, caf::infinite, c)
                .then(
                    [self, until_done, started, done, c](int64_t used) mutable {
                      auto& st = self->state;
                      st.graph_bytes = used;
                      const auto n = st.graphs_tried;
                      if (!until_done || n % 16 == 0 || n == st.graphs_planned)
                        spdlog::info("rank {}: CUDA graphs {}/{} {} ({} {} tokens, {:.1f} ms); "
                                     "{:.1f} MiB in graphs, {:.2f} s",
                                     st.config.rank, n, st.graphs_planned,
                                     until_done ? "captured" : "captured lazily",
                                     to_string(c.graph.mode), c.graph.num_tokens,
                                     static_cast<double>(c.duration_ns) / 1e6,
                                     static_cast<double>(used) / (1 << 20),
                                     static_cast<double>(since(started)) / 1e9);
                      if (until_done)
                        capture_graphs(self, true, started, std::move(done));
                      else
                        done({});
                    },
                    [done](caf::error& e) mutable { done(std::move(e)); });
          },
          [done](caf::error& e) mutable { done(std::move(e)); });
}

} // namespace

rank_actor::behavior_type rank(rank_actor::stateful_pointer<rank_state> self) {
  return rank_with(self, rank_runtime{});
}

rank_actor::behavior_type rank_with(rank_actor::stateful_pointer<rank_state> self,
                                    rank_runtime runtime) {
  self->state.comm = std::move(runtime.comm);
  self->state.nccl = runtime.nccl;
  self->state.socket_host = runtime.socket_host;
  self->state.device_index = runtime.device_index;
  self->state.on_join = std::move(runtime.on_join);
  self->state.collective_timeout = runtime.collective_timeout;
  self->state.stall_before_collective = runtime.stall_before_collective;
  if (!self->state.comm && !self->state.nccl && self->state.socket_host.empty())
    self->state.comm = kernels::host_communicator::create_group(1).front();
  self->state.recorder = std::move(runtime.recorder);
  self->state.metadata_digest = runtime.metadata_digest || self->state.recorder != nullptr;
  self->set_exception_handler([self](caf::scheduled_actor*, std::exception_ptr& ep) -> caf::error {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      return fail(errc::invalid_argument,
                  fmt::format("rank {}: {}", self->state.config.rank, e.what()));
    }
  });
  return {
      [self](atom::configure, const rank_config& cfg) -> caf::result<rank_plan> {
        auto& st = self->state;
        if (st.kv)
          return fail(errc::invalid_argument, "configure: this rank is already configured");
        if (!st.comm)
          return fail(errc::invalid_argument,
                      "configure: this rank has not joined its NCCL communicator (the driver "
                      "sends unique_id and join first)");
        st.config = cfg;
        st.trace_name = "rank[" + std::to_string(cfg.rank) + "]";
        st.graphs_trace_name = "cudagraph@" + st.trace_name;
        const int world = st.comm->world_size();
        if (cfg.tensor_parallel_size != world)
          return fail(errc::invalid_argument,
                      fmt::format("tensor_parallel_size: {} ranks, but this rank's communicator "
                                  "joins {}",
                                  cfg.tensor_parallel_size, world));
        if (cfg.rank != st.comm->rank())
          return fail(errc::invalid_argument,
                      fmt::format("rank: the driver configures rank {}, this rank's communicator "
                                  "holds rank {}",
                                  cfg.rank, st.comm->rank()));
        if (cfg.device == "cuda")
          if (auto info = kernels::gpu_memory_info()) st.device_free_at_start = info->first;
        auto t = clock_type::now();
        load_options opt;
        opt.tensor_parallel_size = cfg.tensor_parallel_size;
        opt.dtype = cfg.dtype;
        opt.kv_cache_dtype = cfg.kv_cache_dtype;
        auto models = load_model(cfg.model, opt);
        if (!models) return to_caf_error(models.err());
        if (cfg.rank < 0 || cfg.rank >= static_cast<int32_t>(models->size()))
          return fail(errc::invalid_argument,
                      fmt::format("rank: {} is outside [0, {})", cfg.rank, models->size()));
        st.model = std::move((*models)[static_cast<size_t>(cfg.rank)]);
        record(st, "load model", t, 0);
        t = clock_type::now();
        auto stack_cfg = stack_config_for(st.model, cfg.seed);
        if (!stack_cfg) return to_caf_error(stack_cfg.err());
        st.hidden_size = stack_cfg->hidden_size;
        if (cfg.device == "cuda") {
          // Rank r runs on GPU r (on a cluster node: its slot's); one rank alone all-reduces
          // nothing.
          auto ex = make_cuda_executor(*stack_cfg, cfg.max_num_batched_tokens,
                                       world > 1 ? st.comm : nullptr,
                                       st.device_index >= 0 ? st.device_index : cfg.rank);
          if (!ex) return to_caf_error(ex.err());
          st.executor = std::move(*ex);
        } else {
          try {
            st.executor = make_cpu_executor(
                std::make_unique<kernels::attention_stack>(std::move(*stack_cfg)), st.comm);
          } catch (const std::exception& e) {
            return fail(errc::invalid_argument, fmt::format("model {}: {}", cfg.model, e.what()));
          }
        }
        record(st, "weights", t, 0);
        st.allocator = std::make_shared<kv_cache_allocator>(
            cfg.device == "cuda" ? device_kv_memory(cfg.rank) : host_kv_memory());
        st.kv = self->spawn(kv_cache, st.allocator);
        st.registry = self->spawn(registry, std::vector<backend_capabilities>{});
        st.graphs = self->spawn(cudagraph);
        kv_plan_request req;
        req.limits.max_model_len =
            cfg.max_model_len > 0 ? cfg.max_model_len : st.model.max_position_embeddings;
        req.limits.max_in_flight_tokens = cfg.max_num_batched_tokens;
        req.limits.max_encoder_input_tokens = st.model.max_encoder_input_tokens;
        req.block_size = cfg.block_size;
        req.available_bytes = cfg.kv_cache_memory;
        req.num_gpu_blocks_override = cfg.num_gpu_blocks_override;
        st.config.max_model_len = req.limits.max_model_len;
        auto rp = self->make_response_promise<rank_plan>();
        t = clock_type::now();
        self->request(st.kv, caf::infinite, atom::plan_v, st.model, req)
            .then(
                [self, rp, t](kv_local_plan& kv) mutable {
                  auto& st = self->state;
                  record(st, "kv_cache plan", t, 0);
                  st.planned_blocks = kv.config.num_blocks;
                  st.groups = st.allocator->groups();
                  auto t2 = clock_type::now();
                  self->request(st.registry, caf::infinite, atom::assign_v, st.model, st.groups,
                                st.config.device, st.config.attention_backend)
                      .then(
                          [self, rp, t2, kv](backend_assignment& a) mutable {
                            auto& st = self->state;
                            record(st, "registry assign", t2, 0);
                            st.backends = a;
                            rp.deliver(rank_plan{st.config.rank, kv, std::move(a), st.phases});
                          },
                          [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
                },
                [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [self](atom::allocate, int64_t num_blocks) -> caf::result<rank_ready> {
        auto& st = self->state;
        if (!st.kv || (st.groups.empty() && st.backends.kernel_block_sizes.empty()))
          return fail(errc::invalid_argument, "allocate: received before configure");
        if (st.ready)
          return fail(errc::invalid_argument, "allocate: this rank is already allocated");
        // Every rank checks the driver's minimum against the one the ranks agree on themselves.
        if (auto err = agree_on_blocks(st, num_blocks)) return err;
        auto rp = self->make_response_promise<rank_ready>();
        auto t = clock_type::now();
        self->request(st.kv, caf::infinite, atom::allocate_v, num_blocks,
                      st.backends.kernel_block_sizes)
            .then(
                [self, rp, t, num_blocks](kv_allocation& alloc) mutable {
                  auto& st = self->state;
                  record(st, "kv_cache allocate", t, alloc.bytes);
                  // Bind: one kernel view per stack layer (sharing layers alias their target's).
                  std::vector<kernels::kv_view> views(st.model.layers.size());
                  std::vector<std::string> names;
                  st.layer_group.assign(st.model.layers.size(), 0);
                  for (size_t l = 0; l < st.model.layers.size(); ++l) {
                    const auto& name = st.model.layers[l].name;
                    names.push_back(name);
                    for (size_t g = 0; g < st.groups.size(); ++g) {
                      const auto& names_g = st.groups[g].layer_names;
                      if (std::find(names_g.begin(), names_g.end(), name) != names_g.end())
                        st.layer_group[l] = static_cast<int32_t>(g);
                    }
                    auto v = std::find_if(alloc.views.begin(), alloc.views.end(),
                                          [&](const kv_cache_view& x) { return x.layer == name; });
                    if (v == alloc.views.end()) continue;
                    auto kv = kernel_view(st.allocator->base(), *v);
                    if (!kv) {
                      rp.deliver(to_caf_error(kv.err()));
                      return;
                    }
                    views[l] = *kv;
                  }
                  if (auto bound = st.executor->bind(std::move(views), std::move(names),
                                                     st.config.max_num_batched_tokens);
                      !bound) {
                    rp.deliver(to_caf_error(bound.err()));
                    return;
                  }
                  // Geometry of the memory-owning groups, the step state, the builders.
                  const auto& planned = st.allocator->config().groups;
                  st.geometry.clear();
                  for (size_t g = 0; g < planned.size(); ++g) {
                    group_geometry geo;
                    geo.block_size = planned[g].spec.block_size;
                    geo.kernel_block_size = st.backends.kernel_block_sizes[g] > 0
                                                ? st.backends.kernel_block_sizes[g]
                                                : geo.block_size;
                    geo.positional = group_kind(planned[g].spec) != kv_cache_spec_kind::mamba;
                    st.geometry.push_back(geo);
                  }
                  st.steps = step_state(st.geometry, num_blocks, st.config.max_model_len,
                                        st.config.max_num_batched_tokens, st.config.max_num_seqs);
                  st.batch = std::make_shared<step_batch>();
                  st.workspace = std::make_shared<std::vector<std::byte>>();
                  std::vector<std::vector<attention_group>> attn(
                      st.backends.attention_groups.begin(),
                      st.backends.attention_groups.begin()
                          + static_cast<std::ptrdiff_t>(
                              std::min(planned.size(), st.backends.attention_groups.size())));
                  for (int32_t u = 0; u < st.config.num_ubatches; ++u) {
                    auto out = std::make_shared<ubatch_output>();
                    st.outputs.push_back(out);
                    st.builders.push_back(
                        self->spawn(builder, builder_setup{u, st.batch, out, attn, st.geometry,
                                                           st.workspace, st.metadata_digest}));
                    st.builder_trace_names.push_back("builder[" + std::to_string(u) + "]@"
                                                     + st.trace_name);
                  }
                  cudagraph_request gr;
                  gr.requested = st.config.cudagraph;
                  gr.support = st.backends.support;
                  gr.max_num_seqs = st.config.max_num_seqs;
                  gr.max_num_batched_tokens = st.config.max_num_batched_tokens;
                  gr.capture_sizes = st.config.cudagraph_capture_sizes;
                  gr.num_blocks = num_blocks;
                  gr.gpu = st.config.device == "cuda";
                  gr.lazy = st.config.cudagraph_lazy;
                  gr.memory_cap = st.config.cudagraph_memory;
                  if (gr.gpu && st.config.tensor_parallel_size > 1)
                    gr.not_capturable =
                        "tensor parallelism: the NCCL all-reduce is not captured in graphs yet, "
                        "every step runs eagerly";
                  auto t2 = clock_type::now();
                  if (st.recorder) st.recorder->record(st.trace_name, st.graphs_trace_name, gr);
                  self->request(st.graphs, caf::infinite, atom::plan_v, gr)
                      .then(
                          [self, rp, t2, num_blocks,
                           bytes = alloc.bytes](cudagraph_plan& plan) mutable {
                            auto& st = self->state;
                            if (st.recorder)
                              st.recorder->record(st.graphs_trace_name, st.trace_name, plan);
                            record(st, "cudagraph plan", t2, 0);
                            st.graphs_enabled = prepare_graphs(st, plan);
                            auto ready = [self, rp, num_blocks, bytes,
                                          plan](caf::error err) mutable {
                              auto& st = self->state;
                              if (err) {
                                rp.deliver(std::move(err));
                                return;
                              }
                              st.ready = true;
                              rp.deliver(rank_ready{st.config.rank, num_blocks, bytes,
                                                    std::move(plan), st.phases});
                            };
                            if (!st.graphs_enabled || st.config.cudagraph_lazy) {
                              st.lazy_capture = st.graphs_enabled;
                              ready({});
                              return;
                            }
                            const auto t3 = clock_type::now();
                            capture_graphs(
                                self, true, t3, [self, t3, ready](caf::error err) mutable {
                                  auto& st = self->state;
                                  record(st, "cudagraph capture", t3, st.graph_bytes);
                                  if (st.graphs_tried < st.graphs_planned)
                                    spdlog::warn("rank {}: {} of {} CUDA graphs captured "
                                                 "within --cudagraph-memory; the rest run "
                                                 "eagerly",
                                                 st.config.rank, st.graphs_tried - st.graphs_failed,
                                                 st.graphs_planned);
                                  ready(std::move(err));
                                });
                          },
                          [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
                },
                [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [self](const step_plan& plan) -> caf::result<step_done> {
        auto& st = self->state;
        if (!st.ready) return fail(errc::invalid_argument, "step_plan: the rank is not allocated");
        if (st.busy)
          return fail(errc::invalid_argument,
                      fmt::format("seq: step {} arrived while a step is in flight", plan.seq));
        if (auto rejected = st.steps.validate(plan))
          return to_caf_error(rejected->err, rejected->request_ids);
        const auto started = clock_type::now();
        st.steps.apply(plan, *st.batch);
        const auto& b = *st.batch;
        if (b.num_tokens() == 0) return step_done{plan.seq, plan.epoch, st.config.rank, {}, {}, {}};
        // Slices: one per builder; two only when the batch splits without an empty slice.
        std::vector<ubatch_work> work;
        if (plan.num_ubatches == 2 && st.builders.size() >= 2 && b.num_tokens() >= 2) {
          std::vector<int32_t> counts;
          for (int32_t r = 0; r < b.num_reqs(); ++r)
            counts.push_back(b.query_start_loc[static_cast<size_t>(r) + 1]
                             - b.query_start_loc[static_cast<size_t>(r)]);
          if (auto slices = make_ubatch_slices(counts, b.num_tokens(), b.num_reqs(), 2))
            for (size_t u = 0; u < slices->slices.size(); ++u) {
              const auto& s = slices->slices[u];
              work.push_back({plan.seq, static_cast<int32_t>(u), s.token_start, s.token_end,
                              s.req_start, s.req_end});
            }
        }
        if (work.empty()) work.push_back({plan.seq, 0, 0, b.num_tokens(), 0, b.num_reqs()});
        // Builders without work this step must not look current (seq 0 starts every epoch).
        for (size_t u = work.size(); u < st.outputs.size(); ++u)
          *st.outputs[u] = ubatch_output{std::numeric_limits<uint64_t>::max(), 0, 0, 0, {}};
        st.busy = true;
        auto rp = self->make_response_promise<step_done>();
        struct join {
          size_t pending;
          int64_t metadata_ns = 0;
          batch_descriptor desc;
          caf::error err;
        };
        // Without graphs every batch runs eagerly: no dispatch round trip to ask that.
        auto j = std::make_shared<join>(join{work.size() + (st.graphs_enabled ? 1 : 0), 0, {}, {}});
        if (!st.graphs_enabled)
          j->desc = {cudagraph_mode::none, b.num_tokens(), b.num_reqs(), 0, 0, 0, false, 1};
        auto finish = [self, rp, j, plan, started]() mutable {
          if (--j->pending > 0) return;
          auto& st = self->state;
          st.busy = false;
          // Past apply(), the step's sequence number is consumed: failures say so.
          auto consumed = [&](const std::string& why, errc code = errc::step_failed) {
            // Tensor-parallel peers may be waiting in an all-reduce for this rank.
            if (st.comm) st.comm->abort(fmt::format("rank {}: {}", st.config.rank, why));
            rp.deliver(to_caf_error(make_error(code, fmt::format("step {}: {}", plan.seq, why))));
          };
          if (j->err) {
            consumed(from_caf_error(j->err).message);
            return;
          }
          const auto compute_start = clock_type::now();
          auto done = st.config.execute_kernels ? execute(st, plan, j->desc)
                                                : protocol_only(st, plan, j->desc);
          if (!done) {
            consumed(done.err().message, done.err().code == errc::collective_failed
                                             ? errc::collective_failed
                                             : errc::step_failed);
            return;
          }
          done->timing.metadata_ns = j->metadata_ns;
          done->timing.compute_ns = since(compute_start);
          done->timing.total_ns = since(started);
          rp.deliver(std::move(*done));
          // Lazy capture: one graph between this step and the next, if one is wanted.
          if (st.lazy_capture && !st.capturing) {
            st.capturing = true;
            capture_graphs(self, false, clock_type::now(), [self](caf::error err) {
              self->state.capturing = false;
              if (err)
                spdlog::warn("rank {}: lazy CUDA graph capture: {}", self->state.config.rank,
                             from_caf_error(err).message);
            });
          }
        };
        for (const auto& w : work) {
          const auto u = static_cast<size_t>(w.ubatch);
          if (st.recorder) st.recorder->record(st.trace_name, st.builder_trace_names[u], w);
          self->request(st.builders[u], caf::infinite, w)
              .then(
                  [self, j, finish, u](metadata_ready& r) mutable {
                    auto& s = self->state;
                    if (s.recorder) s.recorder->record(s.builder_trace_names[u], s.trace_name, r);
                    j->metadata_ns = std::max(j->metadata_ns, r.build_ns);
                    finish();
                  },
                  [j, finish](caf::error& e) mutable {
                    j->err = std::move(e);
                    finish();
                  });
        }
        if (!st.graphs_enabled) return rp;
        const int32_t uniform =
            b.max_query_len == 1 && b.num_reqs() > 0 && b.num_tokens() == b.num_reqs() ? 1 : 0;
        self->request(st.graphs, caf::infinite, atom::dispatch_v, b.num_reqs(), b.num_tokens(),
                      uniform)
            .then(
                [self, j, finish](batch_descriptor& d) mutable {
                  auto& s = self->state;
                  if (s.recorder) s.recorder->record(s.graphs_trace_name, s.trace_name, d);
                  j->desc = d;
                  finish();
                },
                [j, finish](caf::error& e) mutable {
                  j->err = std::move(e);
                  finish();
                });
        return rp;
      },
      [self](atom::ledger) -> caf::result<std::vector<memory_entry>> {
        auto& st = self->state;
        if (!st.allocator) return std::vector<memory_entry>{};
        auto out = st.allocator->ledger();
        if (st.executor)
          for (auto& e : st.executor->ledger())
            out.push_back(std::move(e));
        out.push_back({"workspace", st.workspace ? static_cast<int64_t>(st.workspace->size()) : 0});
        return out;
      },
      [self](atom::unique_id, int32_t world, uint64_t epoch) -> caf::result<communicator_id> {
        return create_communicator_id(self->state, world, epoch);
      },
      [self](atom::join, const communicator_id& id, int32_t rank) -> caf::result<int32_t> {
        return join_communicator(self->state, id, rank);
      },
      [self](atom::collectives) -> std::vector<collective_entry> {
        return collectives_of(self->state);
      },
  };
}

} // namespace kvactor
