// ALL typed actor interfaces of kvactor, one banner per actor and one comment per handler.
// A wrong message is a compile error. Handlers reply with caf::error values of the "kvactor"
// category (messages/caf_error.hpp) that name the field and value at fault.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/backend.hpp"
#include "messages/collective.hpp"
#include "messages/cudagraph.hpp"
#include "messages/inject.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"
#include "messages/node.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"
#include "messages/type_ids.hpp"

namespace kvactor {

/// The REGISTRY actor: attention backends and their declared capabilities.
using registry_actor = caf::typed_actor<
    // Resolve a backend per layer, form attention groups per KV cache group, pick kernel block
    // sizes and report the weakest graph support. (layers, groups, device, preferred backend)
    caf::replies_to<atom::assign, model_layout, std::vector<kv_cache_group>, device_kind,
                    std::string>::with<backend_assignment>,
    // The registered backends.
    caf::replies_to<atom::backends>::with<std::vector<backend_capabilities>>>;

/// The KV_CACHE actor: plans, allocates and lays out one rank's KV cache; keeps the ledger.
using kv_cache_actor = caf::typed_actor<
    // Plan the rank's layers with its own budget (before the minimum over ranks).
    caf::replies_to<atom::plan, model_layout, kv_plan_request>::with<kv_local_plan>,
    // Allocate num_blocks blocks with these kernel block sizes (per group) and build the views.
    caf::replies_to<atom::allocate, int64_t, std::vector<int32_t>>::with<kv_allocation>,
    // Every byte this rank allocated, by owner.
    caf::replies_to<atom::ledger>::with<std::vector<memory_entry>>>;

/// A BUILDER actor (one per microbatch): attention metadata for its slice of a step.
using builder_actor = caf::typed_actor<
    // Build the slice's metadata into the builder's persistent buffers.
    caf::replies_to<ubatch_work>::with<metadata_ready>>;

/// The CUDAGRAPH actor: graph mode, capture sizes, candidates and dispatch.
using cudagraph_actor = caf::typed_actor<
    // Resolve the mode against attention support and build the candidates.
    caf::replies_to<atom::plan, cudagraph_request>::with<cudagraph_plan>,
    // Which graph (or eager) runs a batch of (num_reqs, num_tokens, uniform token count): only
    // captured graphs are chosen; in lazy mode the batch also counts towards what to capture.
    caf::replies_to<atom::dispatch, int32_t, int32_t, int32_t>::with<batch_descriptor>,
    // The graph to capture next (none: all wanted graphs captured, or the memory cap reached).
    caf::replies_to<atom::capture>::with<std::vector<batch_descriptor>>,
    // How a capture went; replies the bytes all captured graphs hold.
    caf::replies_to<cudagraph_captured>::with<int64_t>>;

/// The RANK actor: one per GPU (or CPU rank); composes registry, kv_cache, builders, cudagraph.
using rank_actor = caf::typed_actor<
    // Load the model, plan the KV cache with the local budget, resolve backends.
    caf::replies_to<atom::configure, rank_config>::with<rank_plan>,
    // Allocate the common block count, bind views, start builders and plan graphs.
    caf::replies_to<atom::allocate, int64_t>::with<rank_ready>,
    // Execute one step (rejected, unchanged, if out of sequence or invalid).
    caf::replies_to<step_plan>::with<step_done>,
    // Every byte this rank allocated, by owner.
    caf::replies_to<atom::ledger>::with<std::vector<memory_entry>>,
    // NCCL rank 0, before configure: create the id of a new communicator. (world, epoch)
    caf::replies_to<atom::unique_id, int32_t, uint64_t>::with<communicator_id>,
    // NCCL ranks, before configure, all at once: join the communicator as rank N; replies N
    // once it is ready. (id, N)
    caf::replies_to<atom::join, communicator_id, int32_t>::with<int32_t>,
    // This rank's collective ledger, oldest first: where it stands when a collective fails.
    caf::replies_to<atom::collectives>::with<std::vector<collective_entry>>>;

/// Where a serving driver sends what happens to its requests (the server's ingress): one
/// request_updates per step applied or request failed.
using output_sink_actor = caf::typed_actor<caf::reacts_to<request_updates>>;

/// The INGRESS actor (kvactor serve): the server's requests, from the HTTP threads' inbox to the
/// driver and back; the driver's output sink.
using ingress_actor = caf::typed_actor<
    // The driver's updates of the requests it serves.
    caf::reacts_to<request_updates>,
    // The HTTP threads queued calls or disconnects in the inbox.
    caf::reacts_to<atom::wake>,
    // The engine is ready: its driver (a driver_actor) and the model's vocabulary size.
    caf::reacts_to<atom::start, caf::actor, int32_t>,
    // The server stops (SIGTERM): new requests get 503 from now on; once none is in flight, or
    // when the grace period has passed, the driver is told to drain, and what is left fails with
    // the reason.
    caf::reacts_to<atom::drain, caf::timespan, std::string>,
    // The drain's grace period is over (sent to itself).
    caf::reacts_to<atom::timer>,
    // The requests still in flight (answered after every message sent to it before).
    caf::replies_to<atom::stats>::with<int64_t>>;

/// The DRIVER actor: requests, scheduling, block pools and step sequencing over all ranks.
using driver_actor = caf::typed_actor<
    // Configure every rank, agree on the block count, wait until all are ready.
    caf::replies_to<atom::start>::with<std::vector<rank_ready>>,
    // Queue requests (each starts at its arrival offset after `run`).
    caf::replies_to<atom::submit, std::vector<request_spec>>::with<int64_t>,
    // Serve every submitted request to the end; reply with the summary.
    caf::replies_to<atom::run>::with<run_summary>,
    // Take the next step (the driver's own clock: sent to itself, e.g. when a request arrives).
    caf::reacts_to<atom::step>,
    // One of the driver's timers is due (sent to itself: step deadlines, --chaos delays).
    caf::reacts_to<atom::timer, uint64_t>,
    // A node's answer, refusal or lost channel, from the step channel's reader thread.
    caf::reacts_to<node_channel_event>,
    // Stop now (SIGINT, SIGTERM): admit nothing more, fail every unfinished request with the
    // reason and answer `run` with the summary, without waiting for a step in flight.
    caf::reacts_to<atom::drain, std::string>,
    // A request's result once it has finished or failed (answered then; at once if it has).
    caf::replies_to<request_await>::with<request_result>,
    // End a request now: it fails with the reason, its blocks free before the next step.
    caf::reacts_to<request_abort>>;

/// The NODE actor (cluster mode): one per node process; spawns ranks for a driver.
using node_actor = caf::typed_actor<
    // The driver's (protocol, schema, build): the node's node_info, or an error naming the
    // mismatch.
    caf::replies_to<atom::hello, uint32_t, uint32_t, std::string>::with<node_info>,
    // Spawn one rank on a free slot; replies the rank's handle (a rank_actor).
    caf::replies_to<atom::spawn, rank_spawn>::with<caf::strong_actor_ptr>,
    // Stop every rank this node spawned; replies how many it stopped.
    caf::replies_to<atom::release>::with<int32_t>,
    // One step for the node's ranks on the given slots: relayed to each, answered once by all.
    caf::replies_to<node_step>::with<node_step_done>,
    // The same for a step that came on step channel `channel` as step `seq`: the answer (or the
    // refusal) goes to that channel's sink, from the node's thread. (channel, seq, step)
    caf::reacts_to<atom::relay, uint64_t, uint64_t, node_step>,
    // The node's own watchdog (a delayed message to itself, numbered): relays past their
    // deadline report their unanswered ranks silent.
    caf::reacts_to<atom::timer, uint64_t>>;

/// The INJECTOR actor: live injection of one message into a named actor (kvactor inject).
using injector_actor = caf::typed_actor<
    // Deliver the envelope to its target; reply with the target's answer.
    caf::replies_to<inject_request>::with<inject_reply>>;

} // namespace kvactor
