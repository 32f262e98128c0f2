// The ONE CAF type-ID block of kvactor: every type that crosses an actor or process boundary.
// Append only (IDs are positional); register_types() loads the block into an actor system.
#pragma once

#include <cstdint>
#include <vector>

#include <caf/type_id.hpp>

namespace kvactor {
struct attention_layer;
struct model_layout;
struct kv_cache_spec;
struct memory_limits;
struct kv_cache_group;
struct kv_cache_tensor;
struct kv_cache_config;
struct kv_cache_view;
struct kv_cache_capacity;
struct block_size_constraint;
struct backend_capabilities;
struct attention_group;
struct graph_support_info;
struct batch_descriptor;
struct cudagraph_plan;
struct cudagraph_captured;
struct node_info;
struct rank_spawn;
struct node_step;
struct node_step_done;
struct node_channel_event;
enum class channel_event_kind : uint8_t;
struct error;
struct new_request;
struct block_table_update;
struct scheduled_request;
struct step_plan;
struct sampled_token;
struct step_timing;
struct step_done;
struct rank_config;
struct phase_timing;
struct backend_assignment;
struct kv_plan_request;
struct cudagraph_request;
struct memory_entry;
struct kv_local_plan;
struct kv_allocation;
struct rank_plan;
struct rank_ready;
struct ubatch_work;
struct metadata_ready;
struct request_spec;
struct request_result;
struct request_updates;
struct request_abort;
struct request_await;
struct run_summary;
struct inject_request;
struct inject_reply;
struct step_rejected;
struct communicator_id;
struct collective_entry;
enum class device_kind : uint8_t;
} // namespace kvactor

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(kvactor, caf::first_custom_type_id)
  // layer.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::attention_layer))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::model_layout))
  // kv.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_spec))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::memory_limits))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_group))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_tensor))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_config))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_view))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_cache_capacity))
  // backend.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::block_size_constraint))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::backend_capabilities))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::attention_group))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::graph_support_info))
  // cudagraph.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::batch_descriptor))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::cudagraph_plan))
  // errc.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::error))
  // Lists sent as one message element. NOTE(type_ids): add_message_types registers exactly the
  // block; unlike add_message_type<T>(name), it does not register std::vector<T> by itself.
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::attention_layer>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::kv_cache_spec>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::kv_cache_view>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::backend_capabilities>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::attention_group>))
  // step.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::new_request))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::block_table_update))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::scheduled_request))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::step_plan))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::sampled_token))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::step_timing))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::step_done))
  // runtime.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::rank_config))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::phase_timing))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::backend_assignment))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_plan_request))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::cudagraph_request))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::memory_entry))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_local_plan))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::kv_allocation))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::rank_plan))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::rank_ready))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::ubatch_work))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::metadata_ready))
  // request.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::request_spec))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::request_result))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::request_updates))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::request_abort))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::run_summary))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::kv_cache_group>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::memory_entry>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::request_spec>))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<uint64_t>))
  // Atoms (kvactor::atom::configure, kvactor::atom::configure_v, ...); at most 10 characters.
  CAF_ADD_ATOM(kvactor, kvactor::atom, configure, "configure")
  CAF_ADD_ATOM(kvactor, kvactor::atom, plan, "plan")
  CAF_ADD_ATOM(kvactor, kvactor::atom, assign, "assign")
  CAF_ADD_ATOM(kvactor, kvactor::atom, allocate, "allocate")
  CAF_ADD_ATOM(kvactor, kvactor::atom, dispatch, "dispatch")
  CAF_ADD_ATOM(kvactor, kvactor::atom, ledger, "ledger")
  CAF_ADD_ATOM(kvactor, kvactor::atom, backends, "backends")
  CAF_ADD_ATOM(kvactor, kvactor::atom, start, "start")
  CAF_ADD_ATOM(kvactor, kvactor::atom, submit, "submit")
  CAF_ADD_ATOM(kvactor, kvactor::atom, run, "run")
  CAF_ADD_ATOM(kvactor, kvactor::atom, stats, "stats")
  CAF_ADD_ATOM(kvactor, kvactor::atom, step, "step")
  // inject.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::inject_request))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::inject_reply))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::step_rejected))
  // collective.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::communicator_id))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::collective_entry))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::collective_entry>))
  CAF_ADD_ATOM(kvactor, kvactor::atom, unique_id, "unique_id")
  CAF_ADD_ATOM(kvactor, kvactor::atom, join, "join")
  CAF_ADD_ATOM(kvactor, kvactor::atom, collectives, "collective")
  // cudagraph.hpp: capture
  CAF_ADD_TYPE_ID(kvactor, (kvactor::cudagraph_captured))
  CAF_ADD_TYPE_ID(kvactor, (std::vector<kvactor::batch_descriptor>))
  CAF_ADD_ATOM(kvactor, kvactor::atom, capture, "capture")
  // node.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::node_info))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::rank_spawn))
  CAF_ADD_ATOM(kvactor, kvactor::atom, hello, "hello")
  CAF_ADD_ATOM(kvactor, kvactor::atom, spawn, "spawn")
  CAF_ADD_ATOM(kvactor, kvactor::atom, release, "release")
  // device.hpp
  CAF_ADD_TYPE_ID(kvactor, (kvactor::device_kind))
  // the driver's own timers (step deadlines, --chaos)
  CAF_ADD_ATOM(kvactor, kvactor::atom, timer, "timer")
  // node.hpp: a step relayed through a node
  CAF_ADD_TYPE_ID(kvactor, (kvactor::node_step))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::node_step_done))
  // node.hpp: the driver's step channel
  CAF_ADD_TYPE_ID(kvactor, (kvactor::channel_event_kind))
  CAF_ADD_TYPE_ID(kvactor, (kvactor::node_channel_event))
  // a step that came on a node's step channel, relayed by the node actor
  CAF_ADD_ATOM(kvactor, kvactor::atom, relay, "relay")
  // the driver stops admitting and ends its run (SIGINT, SIGTERM)
  CAF_ADD_ATOM(kvactor, kvactor::atom, drain, "drain")
  CAF_ADD_ATOM(kvactor, kvactor::atom, wake, "wake")
  // request.hpp: kvactor inject --wait
  CAF_ADD_TYPE_ID(kvactor, (kvactor::request_await))
CAF_END_TYPE_ID_BLOCK(kvactor)
// clang-format on
