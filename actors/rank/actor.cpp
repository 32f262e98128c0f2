#include "actors/rank/actor.hpp"
#include "actors/spawn_plain.hpp"
#include "actors/step_timeline.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/chaos/actor.hpp"
#include "actors/cudagraph/actor.hpp"
#include "actors/kv_cache/actor.hpp"
#include "actors/rank/device_memory.hpp"
#include "actors/rank/padding_sync.hpp"
#include "actors/rank/startup.hpp"
#include "actors/rank/step_slicing.hpp"
#include "actors/rank/tensor_parallel.hpp"
#include "actors/registry/actor.hpp"
#include "actors/unexpected.hpp"
#include "kvactor/comm/host_communicator.h"
#include "kvactor/kernels/device_runtime.h"
#include "messages/caf_error.hpp"
#include "messages/limits.hpp"
#include "model/loader.hpp"

namespace kvactor {

namespace {

using clock_type = std::chrono::steady_clock;
using rank_self = rank_actor::stateful_pointer<rank_state>;
template <class T>
using promise = caf::typed_response_promise<T>;

int64_t since(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t).count();
}

caf::error fail(errc code, std::string message) {
  return to_caf_error(make_error(code, std::move(message)));
}

template <class T>
void trace(rank_state& st, const std::string& from, const std::string& to, const T& message) {
  if (st.runtime.recorder) st.runtime.recorder->record(from, to, message);
}

// Delivers `e` to whoever waits on `rp` (the error handler of every child request).
template <class T>
auto deliver_error(promise<T> rp) {
  return [rp](caf::error& e) mutable { rp.deliver(std::move(e)); };
}

int32_t gpu_of(const rank_state& st) {
  return st.runtime.device_index >= 0 ? st.runtime.device_index : st.config.rank;
}

// ---------------------------------------------------------------------------------------------
// The memory ledger and the start-up phases

// The memory ledger of a rank: its KV cache and what its executor holds.
std::vector<memory_entry> ledger_of(const rank_state& st) {
  std::vector<memory_entry> out;
  if (st.kv.allocator) out = st.kv.allocator->ledger();
  if (st.executor)
    for (auto& e : st.executor->ledger())
      out.push_back(std::move(e));
  return out;
}

int64_t ledger_bytes(const rank_state& st) {
  int64_t total = 0;
  for (const auto& e : ledger_of(st))
    total += e.bytes;
  return total;
}

// On a GPU every phase is checked against cudaMemGetInfo: what the device lost since the rank
// started, against what the ledger accounts for (the rest is the CUDA context and cuBLAS).
// Returns the device memory used since the start, or -1 where it is not measured.
int64_t check_device_memory(const rank_state& st, const std::string& phase, int64_t ledger) {
  if (st.config.device != device_kind::cuda || st.device_free_at_start <= 0) return -1;
  auto info = kernels::gpu_memory_info();
  if (!info) return -1;
  const int64_t used = st.device_free_at_start - info->first;
  const int64_t gap = used - ledger;
  const auto level = gap > (int64_t{1} << 30) ? spdlog::level::warn : spdlog::level::info;
  spdlog::log(level,
              "rank {}: after {}: ledger {} bytes, cudaMemGetInfo shows {} bytes used since start "
              "({:+} unaccounted)",
              st.config.rank, phase, ledger, used, gap);
  return used;
}

void record(rank_state& st, std::string phase, clock_type::time_point t, int64_t bytes) {
  phase_timing p{std::move(phase), since(t), bytes};
  spdlog::info("rank {}: {} took {:.1f} ms, holds {} bytes", st.config.rank, p.phase,
               static_cast<double>(p.duration_ns) / 1e6, p.memory_bytes);
  p.ledger_bytes = ledger_bytes(st);
  p.device_used_bytes = check_device_memory(st, p.phase, p.ledger_bytes);
  st.phases.push_back(std::move(p));
}

// ---------------------------------------------------------------------------------------------
// configure: check ─► load model ─► executor ─► children ─► kv_cache.plan ─► registry.assign

caf::error accept_config(rank_state& st, const rank_config& cfg) {
  // A driver in another process may send anything: nothing is loaded from a config not checked.
  if (auto ok = check_rank_config(cfg); !ok) return to_caf_error(ok.err());
  if (st.children.kv)
    return fail(errc::invalid_argument, "configure: this rank is already configured");
  if (!st.comm)
    return fail(errc::invalid_argument,
                "configure: this rank has not joined its NCCL communicator (the driver sends "
                "unique_id and join first)");
  if (auto ok = check_communicator(cfg, st.comm->rank(), st.comm->world_size()); !ok)
    return to_caf_error(ok.err());
  st.config = cfg;
  st.names.self = "rank[" + std::to_string(cfg.rank) + "]";
  st.names.graphs = "cudagraph@" + st.names.self;
  if (cfg.device == device_kind::cuda)
    if (auto info = kernels::gpu_memory_info()) st.device_free_at_start = info->first;
  return {};
}

caf::error load_rank_model(rank_state& st) {
  const auto t = clock_type::now();
  load_options opt;
  take<parallel_settings>(opt, st.config);
  take<dtype_settings>(opt, st.config);
  auto models = load_model(st.config.model, opt);
  if (!models) return to_caf_error(models.err());
  if (st.config.rank < 0 || st.config.rank >= static_cast<int32_t>(models->size()))
    return fail(errc::invalid_argument,
                fmt::format("rank: {} is outside [0, {})", st.config.rank, models->size()));
  st.model = std::move((*models)[static_cast<size_t>(st.config.rank)]);
  record(st, "load model", t, 0);
  return {};
}

caf::error make_executor(rank_state& st) {
  const auto t = clock_type::now();
  static const auto builtins =
      std::make_shared<executor_registry>(executor_registry::with_builtins());
  const auto& registry = st.runtime.executors ? *st.runtime.executors : *builtins;
  auto entry = registry.choose(st.config);
  if (!entry) return to_caf_error(entry.err());
  auto ex = (*entry)->make(executor_context{st.config, st.model, st.comm, gpu_of(st)});
  if (!ex) return to_caf_error(ex.err());
  st.executor = std::move(*ex);
  record(st, "weights", t, 0);
  return {};
}

// --chaos: a child behind a relay that delays some of the rank's messages to it (link `n` of
// this rank's children; the graph manager is link 15).
template <class Handle>
Handle disturbed(rank_self self, const Handle& child, uint64_t n) {
  const auto& chaos = self->state.runtime.injected().chaos;
  if (!chaos) return child;
  return behind_chaos(self, child, *chaos,
                      1000 + 16 * static_cast<uint64_t>(std::max(self->state.config.rank, 0)) + n);
}

void spawn_children(rank_self self) {
  auto& st = self->state;
  st.kv.allocator = std::make_shared<kv_cache_allocator>(
      st.config.device == device_kind::cuda ? device_kv_memory(gpu_of(st)) : host_kv_memory());
  st.children.kv = self->spawn(kv_cache, st.kv.allocator);
  st.children.registry = self->spawn(registry, std::vector<backend_capabilities>{});
  st.children.graphs = disturbed(self, self->spawn(plain<&cudagraph>, nullptr), 15);
}

void assign_backends(rank_self self, promise<rank_plan> rp, kv_local_plan kv) {
  auto& st = self->state;
  const auto t = clock_type::now();
  self->request(st.children.registry, caf::infinite, atom::assign_v, st.model, st.kv.groups,
                st.config.device, st.config.attention_backend)
      .then(
          [self, rp, t, kv](backend_assignment& a) mutable {
            auto& st = self->state;
            record(st, "registry assign", t, 0);
            st.kv.backends = a;
            rp.deliver(rank_plan{st.config.rank, kv, std::move(a), st.phases});
          },
          deliver_error(rp));
}

void plan_kv(rank_self self, promise<rank_plan> rp) {
  auto& st = self->state;
  const auto req = kv_plan_request_for(st.config, st.model);
  st.config.max_model_len = req.limits.max_model_len;
  const auto t = clock_type::now();
  self->request(st.children.kv, caf::infinite, atom::plan_v, st.model, req)
      .then(
          [self, rp, t](kv_local_plan& kv) mutable {
            auto& st = self->state;
            record(st, "kv_cache plan", t, 0);
            st.kv.planned_blocks = kv.config.num_blocks;
            st.kv.groups = st.kv.allocator->groups();
            assign_backends(self, rp, std::move(kv));
          },
          deliver_error(rp));
}

// The actor that configures the rank drives it: the rank watches it (follow_driver below).
void watch_driver(rank_self self) {
  const auto& driver = self->current_sender();
  if (!driver || self->state.driver) return;
  self->state.driver = caf::actor_cast<caf::actor_addr>(driver);
  self->monitor(driver);
}

// Its driver is gone (the run ended without stopping it, the driver was killed, its link was
// cut): the rank stops, so that a detached rank never keeps its thread, its slot on a node and
// its GPU memory for a driver that will not come back. Peers blocked in a collective with it are
// released by the abort.
void follow_driver(rank_self self) {
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    if (msg.source != st.driver) return;
    // A driver stopped at the end of its run (user_shutdown) is the normal end: the rank may see
    // that before its own stop arrives. Anything else is worth a warning.
    const auto level =
        msg.reason == caf::exit_reason::user_shutdown ? spdlog::level::info : spdlog::level::warn;
    spdlog::log(level, "rank {}: its driver is gone ({}); stopping", st.config.rank,
                to_string(msg.reason));
    if (st.comm) st.comm->abort(fmt::format("rank {}: its driver is gone", st.config.rank));
    self->quit(caf::exit_reason::user_shutdown);
  });
}

caf::result<rank_plan> configure(rank_self self, const rank_config& cfg) {
  auto& st = self->state;
  watch_driver(self);
  if (auto err = accept_config(st, cfg)) return err;
  if (auto err = load_rank_model(st)) return err;
  if (auto err = make_executor(st)) return err;
  spawn_children(self);
  auto rp = self->make_response_promise<rank_plan>();
  plan_kv(self, rp);
  return rp;
}

// ---------------------------------------------------------------------------------------------
// allocate: agree ─► kv_cache.allocate ─► bind ─► builders ─► cudagraph.plan ─► [capture] ─► ready

// Binds the executor to the allocated KV cache and sets up the step state for `num_blocks`.
caf::error bind_kv(rank_state& st, const kv_allocation& alloc, int64_t num_blocks) {
  auto binding = bind_layers(st.model, st.kv.groups, alloc.views, st.kv.allocator->base());
  if (!binding) return to_caf_error(binding.err());
  st.kv.layer_group = binding->layer_group;
  const auto& views = binding->views;
  if (st.config.rank == 0 && std::any_of(views.begin(), views.end(), [](const kernels::kv_view& v) {
        return v.type == kernels::element_type::fp8_e4m3;
      }))
    spdlog::warn("rank 0: FP8 KV cache with k_scale = v_scale = 1 (vLLM's default when the "
                 "checkpoint has none); values beyond +-448 saturate");
  if (auto bound = st.executor->bind(std::move(binding->views), std::move(binding->layer_names),
                                     st.config.max_num_batched_tokens);
      !bound)
    return to_caf_error(bound.err());
  if (st.config.rank == 0) {
    const auto req = kv_plan_request_for(st.config, st.model);
    for (const auto& line : kv_capacity_lines(st.kv.allocator->config(), req.limits,
                                              req.available_bytes, st.config.device))
      spdlog::info("{}", line);
  }
  st.kv.geometry =
      group_geometries(st.kv.allocator->config().groups, st.kv.backends.kernel_block_sizes);
  st.steps.requests = step_state(st.kv.geometry, num_blocks, st.config.max_model_len,
                                 st.config.max_num_batched_tokens, st.config.max_num_seqs);
  st.steps.batch = std::make_shared<step_batch>();
  return {};
}

void spawn_builders(rank_self self) {
  auto& st = self->state;
  const auto attention =
      builder_attention_groups(st.kv.backends, st.kv.allocator->config().groups.size());
  for (int32_t u = 0; u < st.config.num_ubatches; ++u) {
    auto out = std::make_shared<ubatch_output>();
    st.steps.outputs.push_back(out);
    st.children.builders.push_back(
        disturbed(self,
                  self->spawn(builder, builder_setup{u, st.steps.batch, out, attention,
                                                     st.kv.geometry, st.runtime.metadata_digest}),
                  static_cast<uint64_t>(u)));
    st.names.builders.push_back("builder[" + std::to_string(u) + "]@" + st.names.self);
  }
}

// The executor's persistent graph inputs, sized for the plan; false (with a note in the plan)
// when this executor cannot replay graphs; an error when a collective of the tensor-parallel
// group failed on the way (its communicator is gone: the rank cannot serve).
expected<bool> prepare_graphs(rank_state& st, cudagraph_plan& plan) {
  if (plan.mode == cudagraph_mode::none || plan.capture_sizes.empty()) return false;
  auto setup =
      graph_setup_for(plan, st.kv.layer_group, st.config.max_num_seqs, st.steps.requests.widths());
  setup.fail_capture = st.runtime.injected().fail_capture;
  if (auto ok = st.executor->prepare_graphs(setup); !ok) {
    if (ok.err().code == errc::collective_failed) return ok.err();
    spdlog::warn("rank {}: {}", st.config.rank, ok.err().message);
    plan.notes.push_back(ok.err().message);
    return false;
  }
  st.graphs.planned = plan.full_graphs.size() + plan.piecewise_graphs.size();
  return true;
}

void log_capture(const rank_state& st, const cudagraph_captured& c, bool startup,
                 clock_type::time_point started) {
  const auto n = st.graphs.tried;
  if (startup && n % 16 != 0 && n != st.graphs.planned) return;
  spdlog::info(
      "rank {}: CUDA graphs {}/{} {} ({} {} tokens, {:.1f} ms); {:.1f} MiB in graphs, "
      "{:.2f} s",
      st.config.rank, n, st.graphs.planned, startup ? "captured" : "captured lazily",
      to_string(c.graph.mode), c.graph.num_tokens, static_cast<double>(c.duration_ns) / 1e6,
      static_cast<double>(st.graphs.bytes) / (1 << 20), static_cast<double>(since(started)) / 1e9);
}

// Captures `graph` on the executor; a failure leaves it eager and is reported, not fatal.
cudagraph_captured capture_one(rank_state& st, const batch_descriptor& graph) {
  cudagraph_captured c;
  c.graph = graph;
  if (auto r = st.executor->capture(c.graph)) {
    c.bytes = r->bytes;
    c.duration_ns = r->duration_ns;
  } else {
    c.error = r.err().message;
    ++st.graphs.failed;
    spdlog::warn("rank {}: {} graph of {} tokens stays eager: {}", st.config.rank,
                 to_string(c.graph.mode), c.graph.num_tokens, c.error);
  }
  ++st.graphs.tried;
  return c;
}

// Captures the graph the graph manager offers next and reports how it went; with `until_done`
// goes on until nothing is offered (start-up), else stops after one (lazy: one per step).
void capture_graphs(rank_self self, bool until_done, clock_type::time_point started,
                    std::function<void(caf::error)> done) {
  auto on_error = [done](caf::error& e) mutable { done(std::move(e)); };
  auto& st = self->state;
  self->request(st.children.graphs, caf::infinite, atom::capture_v)
      .then(
          [self, until_done, started, done, on_error](std::vector<batch_descriptor>& next) mutable {
            auto& st = self->state;
            if (next.empty()) {
              done({});
              return;
            }
            auto c = capture_one(st, next.front());
            trace(st, st.names.self, st.names.graphs, c);
            self->request(st.children.graphs, caf::infinite, c)
                .then(
                    [self, until_done, started, done, c](int64_t used) mutable {
                      auto& st = self->state;
                      st.graphs.bytes = used;
                      log_capture(st, c, until_done, started);
                      if (until_done)
                        capture_graphs(self, true, started, std::move(done));
                      else
                        done({});
                    },
                    on_error);
          },
          on_error);
}

void capture_at_startup(rank_self self, std::function<void(caf::error)> ready) {
  const auto t = clock_type::now();
  capture_graphs(self, true, t, [self, t, ready](caf::error err) {
    auto& st = self->state;
    record(st, "cudagraph capture", t, st.graphs.bytes);
    if (st.graphs.tried < st.graphs.planned)
      spdlog::warn("rank {}: {} of {} CUDA graphs captured within --cudagraph-memory; the rest "
                   "run eagerly",
                   st.config.rank, st.graphs.tried - st.graphs.failed, st.graphs.planned);
    ready(std::move(err));
  });
}

void plan_graphs(rank_self self, promise<rank_ready> rp, int64_t num_blocks, int64_t bytes) {
  auto& st = self->state;
  const auto gr = cudagraph_request_for(st.config, st.kv.backends.support, num_blocks,
                                        st.config.device == device_kind::cuda);
  const auto t = clock_type::now();
  trace(st, st.names.self, st.names.graphs, gr);
  self->request(st.children.graphs, caf::infinite, atom::plan_v, gr)
      .then(
          [self, rp, t, num_blocks, bytes](cudagraph_plan& plan) mutable {
            auto& st = self->state;
            trace(st, st.names.graphs, st.names.self, plan);
            record(st, "cudagraph plan", t, 0);
            auto enabled = prepare_graphs(st, plan);
            if (!enabled) {
              rp.deliver(to_caf_error(enabled.err()));
              return;
            }
            st.graphs.enabled = *enabled;
            auto ready = [self, rp, num_blocks, bytes, plan](caf::error err) mutable {
              auto& st = self->state;
              if (err) {
                rp.deliver(std::move(err));
                return;
              }
              st.ready = true;
              rp.deliver(rank_ready{st.config.rank, num_blocks, bytes, std::move(plan), st.phases,
                                    st.model.vocab_size});
            };
            if (!st.graphs.enabled || st.config.cudagraph_lazy) {
              st.graphs.lazy = st.graphs.enabled;
              ready({});
              return;
            }
            capture_at_startup(self, std::move(ready));
          },
          deliver_error(rp));
}

caf::result<rank_ready> allocate(rank_self self, int64_t num_blocks) {
  auto& st = self->state;
  if (!st.children.kv || (st.kv.groups.empty() && st.kv.backends.kernel_block_sizes.empty()))
    return fail(errc::invalid_argument, "allocate: received before configure");
  if (st.ready) return fail(errc::invalid_argument, "allocate: this rank is already allocated");
  // Every rank checks the driver's minimum against the one the ranks agree on themselves.
  if (auto err = agree_on_blocks(st, num_blocks)) return err;
  auto rp = self->make_response_promise<rank_ready>();
  const auto t = clock_type::now();
  self->request(st.children.kv, caf::infinite, atom::allocate_v, num_blocks,
                st.kv.backends.kernel_block_sizes)
      .then(
          [self, rp, t, num_blocks](kv_allocation& alloc) mutable {
            auto& st = self->state;
            record(st, "kv_cache allocate", t, alloc.bytes);
            if (auto err = bind_kv(st, alloc, num_blocks)) {
              rp.deliver(std::move(err));
              return;
            }
            spawn_builders(self);
            plan_graphs(self, rp, num_blocks, alloc.bytes);
          },
          deliver_error(rp));
  return rp;
}

// ---------------------------------------------------------------------------------------------
// step_plan: validate ─► apply ─► builders + cudagraph.dispatch ─► execute ─► step_done

// One step in flight: what it waits for and what it has gathered.
struct step_join {
  step_plan plan;
  clock_type::time_point started;
  promise<step_done> rp;
  size_t pending = 0;
  int64_t metadata_ns = 0;
  batch_descriptor desc;
  bool padding_settled = false; // tensor-parallel graphs: the ranks agreed on desc
  caf::error err;
};

// The builders' slices of step `seq` that hold tokens, for the executor.
std::vector<executed_ubatch> executed_ubatches(const rank_steps& steps, uint64_t seq) {
  std::vector<executed_ubatch> out;
  for (const auto& o : steps.outputs)
    if (o->seq == seq && o->token_end > o->token_start)
      out.push_back({o->token_start, o->token_end, &o->layers});
  return out;
}

// Row i's logprobs as the message carries them (empty where the row asked for none).
token_logprobs logprobs_of(const kernels::sampled_rows& s, size_t i) {
  token_logprobs out;
  if (i >= s.logprobs.size()) return out;
  const auto& row = s.logprobs[i];
  out.logprob = row.chosen;
  for (size_t k = 0; k < row.top_ids.size(); ++k)
    out.top.push_back({row.top_ids[k], row.top_values[k]});
  return out;
}

// Runs the step on the rank's executor over every ubatch, as dispatched; samples.
expected<step_done> execute(rank_state& st, const step_plan& plan, const batch_descriptor& desc) {
  const auto& b = *st.steps.batch;
  step_done done;
  done.seq = plan.seq;
  done.epoch = plan.epoch;
  done.rank = st.config.rank;
  done.executed = desc;
  auto sampled =
      st.executor->run_dispatched(b, executed_ubatches(st.steps, plan.seq), desc, done.executed);
  if (!sampled) return sampled.err(); // the caller names the step
  for (size_t i = 0; i < sampled->tokens.size(); ++i)
    done.sampled.push_back({b.sample_ids[i], sampled->tokens[i], logprobs_of(*sampled, i)});
  return done;
}

// Lazy capture: one graph between this step and the next, if one is wanted.
void capture_lazily(rank_self self) {
  auto& st = self->state;
  if (!st.graphs.lazy || st.graphs.capturing) return;
  st.graphs.capturing = true;
  capture_graphs(self, false, clock_type::now(), [self](caf::error err) {
    self->state.graphs.capturing = false;
    if (err)
      spdlog::warn("rank {}: lazy CUDA graph capture: {}", self->state.config.rank,
                   from_caf_error(err).message);
  });
}

// The step's one answer, to its request and to every copy of it that came meanwhile; kept for
// copies that come later (a step the driver re-sends).
void answer_step(rank_state& st, step_join& j, expected<step_done> answer) {
  step_timeline::mark(j.plan.seq, st.config.rank, step_point::rank_answered);
  auto deliver = [&](promise<step_done>& rp) {
    if (answer)
      rp.deliver(*answer);
    else
      rp.deliver(to_caf_error(answer.err()));
  };
  deliver(j.rp);
  for (auto& rp : std::exchange(st.steps.copies, {}))
    deliver(rp);
  // The step is over: its plan and answer are kept (moved, not copied) for later copies.
  st.steps.answers.end(std::move(j.plan), std::move(answer));
}

// Past apply() the step's sequence number is consumed: the failure says so, and tensor-parallel
// peers that may wait in an all-reduce for this rank are released.
void fail_consumed_step(rank_state& st, step_join& j, const std::string& why, errc code) {
  if (st.comm) st.comm->abort(fmt::format("rank {}: {}", st.config.rank, why));
  answer_step(st, j, make_error(code, fmt::format("step {}: {}", j.plan.seq, why)));
}

void redispatch(rank_self self, std::shared_ptr<step_join> j, int32_t num_tokens);

// Tensor-parallel ranks with graphs agree on what each dispatched (docs/vllm-semantics.md §8.2),
// so that all replay the same graph or all run eagerly. False when the step goes on later (a
// re-dispatch to the agreed size) or has failed.
bool agree_on_padding(rank_self self, const std::shared_ptr<step_join>& j) {
  auto& st = self->state;
  if (j->padding_settled || !st.graphs.enabled || !st.comm || st.comm->world_size() <= 1)
    return true;
  j->padding_settled = true;
  const auto& b = *st.steps.batch;
  padding_sync sync;
  try {
    sync = sync_padding(*st.comm, b, j->desc);
  } catch (const comm::collective_error& e) {
    st.steps.busy = false;
    fail_consumed_step(st, *j, fmt::format("agreeing on the graph padding: {}", e.what()),
                       errc::collective_failed);
    return false;
  }
  if (sync.unanimous) return true;
  const auto& a = sync.agreement;
  spdlog::info("rank {}: step {}: the ranks dispatched differently ({} here); they agree on {}",
               st.config.rank, j->plan.seq, to_string(j->desc.mode),
               a.eager ? std::string{"eager"}
                       : fmt::format("a graph of at least {} tokens", a.synced_tokens));
  if (!a.redispatch) {
    j->desc = eager_step(b);
    return true;
  }
  redispatch(self, j, a.synced_tokens);
  return false;
}

void finish_step(rank_self self, const std::shared_ptr<step_join>& jp) {
  auto& j = *jp;
  if (--j.pending > 0) return;
  auto& st = self->state;
  if (!j.err && !agree_on_padding(self, jp)) return;
  st.steps.busy = false;
  if (j.err) {
    fail_consumed_step(st, j, from_caf_error(j.err).message, errc::step_failed);
    return;
  }
  const auto compute_start = clock_type::now();
  auto done = execute(st, j.plan, j.desc);
  if (!done) {
    const auto code =
        done.err().code == errc::collective_failed ? errc::collective_failed : errc::step_failed;
    fail_consumed_step(st, j, done.err().message, code);
    return;
  }
  done->timing.metadata_ns = j.metadata_ns;
  done->timing.compute_ns = since(compute_start);
  done->timing.total_ns = since(j.started);
  answer_step(st, j, std::move(*done));
  capture_lazily(self);
}

void build_metadata(rank_self self, std::shared_ptr<step_join> j, const ubatch_work& w) {
  auto& st = self->state;
  const auto u = static_cast<size_t>(w.ubatch);
  trace(st, st.names.self, st.names.builders[u], w);
  self->request(st.children.builders[u], caf::infinite, w)
      .then(
          [self, j, u](metadata_ready& r) {
            auto& st = self->state;
            trace(st, st.names.builders[u], st.names.self, r);
            j->metadata_ns = std::max(j->metadata_ns, r.build_ns);
            finish_step(self, j);
          },
          [self, j](caf::error& e) {
            j->err = std::move(e);
            finish_step(self, j);
          });
}

void dispatch(rank_self self, std::shared_ptr<step_join> j) {
  auto& st = self->state;
  const auto& b = *st.steps.batch;
  self->request(st.children.graphs, caf::infinite, atom::dispatch_v, b.num_reqs(), b.num_tokens(),
                uniform_decode(b))
      .then(
          [self, j](batch_descriptor& d) {
            auto& st = self->state;
            trace(st, st.names.graphs, st.names.self, d);
            j->desc = d;
            finish_step(self, j);
          },
          [self, j](caf::error& e) {
            j->err = std::move(e);
            finish_step(self, j);
          });
}

// The graph manager's dispatch at the agreed token count (this rank's own requests).
void redispatch(rank_self self, std::shared_ptr<step_join> j, int32_t num_tokens) {
  auto& st = self->state;
  const auto& b = *st.steps.batch;
  ++j->pending;
  self->request(st.children.graphs, caf::infinite, atom::dispatch_v, b.num_reqs(), num_tokens,
                uniform_decode(b))
      .then(
          [self, j](batch_descriptor& d) {
            auto& st = self->state;
            trace(st, st.names.graphs, st.names.self, d);
            j->desc = d.mode == cudagraph_mode::none ? eager_step(*st.steps.batch) : d;
            finish_step(self, j);
          },
          [self, j](caf::error& e) {
            j->err = std::move(e);
            finish_step(self, j);
          });
}

// --chaos-kill / --chaos-stall aimed at this step: the rank exits, or answers no step again
// (true). Unanswered either way: the driver learns of a kill from the rank's exit, of a stall
// from its step timeout or from the peers' collective timeout.
bool suffer_step_fault(rank_self self, const step_plan& plan) {
  auto& st = self->state;
  for (const auto& f : st.runtime.injected().step_faults) {
    if (f.seq != plan.seq) continue;
    st.steps.stalled = true;
    const bool kill = f.what == step_fault::kind::kill;
    spdlog::warn("rank {}: {} at step {}", st.config.rank,
                 kill ? "--chaos-kill: exiting" : "--chaos-stall: no more answers", plan.seq);
    if (kill) self->quit(caf::exit_reason::kill);
    return true;
  }
  return false;
}

// A copy of a step seen before: the first copy's answer (now or when it ends).
std::optional<caf::result<step_done>> answer_copy(rank_self self, const step_plan& plan) {
  auto& st = self->state;
  switch (st.steps.answers.classify(plan)) {
  case step_answers::seen::new_step: return std::nullopt;
  case step_answers::seen::in_flight:
    st.steps.copies.push_back(self->make_response_promise<step_done>());
    return caf::result<step_done>{st.steps.copies.back()};
  case step_answers::seen::answered: break;
  }
  const auto& last = st.steps.answers.last();
  if (last) return caf::result<step_done>{*last};
  return caf::result<step_done>{to_caf_error(last.err())};
}

caf::result<step_done> step(rank_self self, const step_plan& plan) {
  auto& st = self->state;
  step_timeline::mark(plan.seq, st.config.rank, step_point::rank_received);
  if (!st.ready) return fail(errc::invalid_argument, "step_plan: the rank is not allocated");
  if (st.steps.stalled || suffer_step_fault(self, plan)) { // kept, never delivered
    st.steps.unanswered.push_back(self->make_response_promise<step_done>());
    return st.steps.unanswered.back();
  }
  if (auto copy = answer_copy(self, plan)) return std::move(*copy);
  if (auto stale = st.steps.requests.check_sequence(plan))
    return to_caf_error(stale->err, stale->request_ids);
  if (st.steps.busy)
    return fail(errc::invalid_argument,
                fmt::format("seq: step {} arrived while a step is in flight", plan.seq));
  if (auto rejected = st.steps.requests.validate(plan))
    return to_caf_error(rejected->err, rejected->request_ids);
  const auto started = clock_type::now();
  st.steps.requests.apply(plan, *st.steps.batch);
  const auto& b = *st.steps.batch;
  if (b.num_tokens() == 0) {
    step_done done{plan.seq, plan.epoch, st.config.rank, {}, {}, {}};
    st.steps.answers.end(plan, done);
    step_timeline::mark(plan.seq, st.config.rank, step_point::rank_answered);
    return done;
  }
  const auto work = slice_step(b, plan.seq, plan.num_ubatches, st.children.builders.size());
  // Builders without work this step must not look current (seq 0 starts every epoch).
  for (size_t u = work.size(); u < st.steps.outputs.size(); ++u)
    *st.steps.outputs[u] = ubatch_output{std::numeric_limits<uint64_t>::max(), 0, 0, 0, {}};
  st.steps.busy = true;
  auto j = std::make_shared<step_join>();
  j->plan = plan;
  j->started = started;
  j->rp = self->make_response_promise<step_done>();
  st.steps.answers.begin(j->plan);
  // Without graphs every batch runs eagerly: no dispatch round trip to ask that.
  j->pending = work.size() + (st.graphs.enabled ? 1 : 0);
  if (!st.graphs.enabled) j->desc = eager_step(b);
  for (const auto& w : work)
    build_metadata(self, j, w);
  if (st.graphs.enabled) dispatch(self, j);
  return j->rp;
}

void handle_exceptions(rank_self self) {
  self->set_exception_handler([self](caf::scheduled_actor*, std::exception_ptr& ep) -> caf::error {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      return fail(errc::invalid_argument,
                  fmt::format("rank {}: {}", self->state.config.rank, e.what()));
    }
  });
}

} // namespace

rank_actor::behavior_type rank(rank_actor::stateful_pointer<rank_state> self) {
  return rank_with(self, rank_runtime{});
}

rank_actor::behavior_type rank_with(rank_actor::stateful_pointer<rank_state> self,
                                    rank_runtime runtime) {
  refuse_unexpected(self);
  auto& st = self->state;
  st.comm = std::move(runtime.comm);
  st.runtime = std::move(runtime);
  if (!st.comm && !st.runtime.nccl && st.runtime.socket_host.empty())
    st.comm = comm::host_communicator::create_group(1).front();
  st.runtime.metadata_digest = st.runtime.metadata_digest || st.runtime.recorder != nullptr;
  handle_exceptions(self);
  follow_driver(self);
  return {
      [self](atom::configure, const rank_config& cfg) -> caf::result<rank_plan> {
        return configure(self, cfg);
      },
      [self](atom::allocate, int64_t num_blocks) -> caf::result<rank_ready> {
        return allocate(self, num_blocks);
      },
      [self](const step_plan& plan) -> caf::result<step_done> { return step(self, plan); },
      [self](atom::ledger) -> caf::result<std::vector<memory_entry>> {
        return ledger_of(self->state);
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
