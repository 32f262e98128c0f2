// Cluster mode: what a node process tells a driver about itself, and the driver's request to
// spawn one rank of its tensor-parallel group on that node.
#pragma once

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include "messages/device.hpp"

namespace kvactor {

/// The driver <-> node protocol; bumped when node messages change. A node and a driver of other
/// versions (or other builds) refuse each other by name.
inline constexpr uint32_t cluster_protocol = 1;

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

  bool operator==(const node_info&) const = default;
};

template <class Inspector>
auto inspect(Inspector& f, node_info& x) {
  return f(caf::meta::type_name("kvactor::node_info"), x.protocol, x.schema, x.build, x.address,
           x.device, x.slots, x.busy, x.pid, x.gpu_total_bytes, x.gpu_free_bytes);
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

} // namespace kvactor
