// Cluster mode: what a node process tells a driver about itself, the driver's request to spawn
// one rank of its tensor-parallel group on that node, and a step relayed through the node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "messages/device.hpp"
#include "messages/step.hpp"

namespace kvactor {

/// The driver <-> node protocol; bumped when node messages change. A node and a driver of other
/// versions (or other builds) refuse each other by name.
inline constexpr uint32_t cluster_protocol = 3; // 2: node_step, node_step_done, 3: step_port

/// A node process, as it answers a driver's hello.
struct node_info {
  uint32_t protocol = 0; // cluster_protocol
  uint32_t schema = 0;   // the message schema version (messages/codec.hpp)
  std::string build;     // the kvactor build (kvactor_build_id())
  std::string address;   // host:port the node listens on
  device_kind device = device_kind::cpu;
  int32_t slots = 0; // ranks it can host (CPU ranks, or its GPUs)
  int32_t busy = 0;  // slots held by ranks of a run
  int64_t pid = 0;
  int64_t gpu_total_bytes = 0; // device memory of its first GPU (cuda nodes)
  int64_t gpu_free_bytes = 0;
  /// The node's step channel (net/step_frame.hpp) on the host of `address`; 0:
  /// none, steps come through the middleman.
  uint16_t step_port = 0;

  bool operator==(const node_info&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("kvactor::node_info"), x.protocol, x.schema, x.build, x.address,
           x.device, x.slots, x.busy, x.pid, x.gpu_total_bytes, x.gpu_free_bytes, x.step_port);
}

/// Driver -> node: spawn rank `rank` of a group of `world` on slot `slot` (a CPU slot, or the
/// index of the GPU it runs on).
struct rank_spawn {
  int32_t rank = 0;
  int32_t world = 1;
  int32_t slot = 0;
  int64_t collective_timeout_ms = 120'000;

  bool operator==(const rank_spawn&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, rank_spawn& x) {
  return f(caf::meta::type_name("kvactor::rank_spawn"), x.rank, x.world, x.slot,
           x.collective_timeout_ms);
}

/// Driver -> node, once per step: `plan` for the node's ranks on `slots` (the node relays it to
/// each and gathers their answers). The plan is a step_plan in kvactor's codec
/// (messages/codec.hpp), encoded once by the driver for every node and decoded once by each,
/// where CAF's serializer would walk the plan field by field for every node. A rank that has not
/// answered after `answer_within_ms` (0: no limit) is reported silent, so that the driver names
/// it before its own step timeout.
struct node_step {
  std::vector<char> plan;
  std::vector<int32_t> slots;
  int64_t answer_within_ms = 0;

  bool operator==(const node_step&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, node_step& x) {
  return f(caf::meta::type_name("kvactor::node_step"), x.plan, x.slots, x.answer_within_ms);
}

/// Node -> driver: the answers of a node_step's ranks, in one message. Every rank named by the
/// step is in exactly one list: it executed the step (done), refused or failed it (rejected), or
/// did not answer in time (silent, by rank). Sent early, with the ranks not yet heard from
/// missing, as soon as one rank's collective failed: its peers may never answer.
struct node_step_done {
  uint64_t seq = 0;
  std::vector<step_done> done;
  std::vector<step_rejected> rejected;
  std::vector<int32_t> silent;

  bool operator==(const node_step_done&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, node_step_done& x) {
  return f(caf::meta::type_name("kvactor::node_step_done"), x.seq, x.done, x.rejected, x.silent);
}

/// What a driver's step channel reports about one node.
enum class channel_event_kind : uint8_t {
  answer,  // the node's answer to a step
  refusal, // the node refused the step as a whole (a slot without a rank, a bad plan)
  lost,    // the channel closed: its steps go through the middleman again
};

/// Step channel -> driver, inside the driver's process: an event of route `route`'s channel (the
/// socket reader is a thread of its own; this is how it wakes the driver).
struct node_channel_event {
  int32_t route = 0;
  channel_event_kind kind = channel_event_kind::answer;
  uint64_t seq = 0;      // the step answered or refused
  node_step_done answer; // answer
  error why;             // refusal, lost

  bool operator==(const node_channel_event&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, node_channel_event& x) {
  return f(caf::meta::type_name("kvactor::node_channel_event"), x.route, x.kind, x.seq, x.answer,
           x.why);
}

} // namespace kvactor
