// Cluster mode's pure core (no CAF): whether a driver and a node may work together, which slots a
// node has free, where each rank of a tensor-parallel group goes, and which listen addresses need
// TLS. The node actor and `kvactor run --nodes` call it; tests call it directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/errc.hpp"
#include "messages/node.hpp"

namespace kvactor {

/// This binary's build: version, git commit and whether the tree was modified
/// ("0.1.0+g1a2b3c4", "0.1.0+g1a2b3c4.dirty").
const std::string& kvactor_build_id();

/// Whether a peer that speaks (protocol, schema, build) may work with this node/driver (`mine`):
/// an errc::incompatible_specs error naming the first field that differs and both values.
status check_peer(const node_info& mine, uint32_t protocol, uint32_t schema,
                  const std::string& build);

/// "host:port" -> (host, port); port 0 is allowed where `allow_any_port` (listen on any free
/// port). Errors name `flag` and the text.
expected<std::pair<std::string, uint16_t>>
parse_host_port(const std::string& text, const std::string& flag, bool allow_any_port = false);

/// 127.0.0.0/8, ::1 and "localhost": reachable from this machine only.
bool is_loopback(const std::string& host);

/// The slots of one node: which are held by ranks of a run.
class node_slots {
public:
  explicit node_slots(int32_t count) : held_(static_cast<size_t>(count > 0 ? count : 0), false) {}
  /// Holds `slot`; errors name the slot when it does not exist or is held already.
  status claim(int32_t slot);
  void free(int32_t slot);
  void free_all();
  int32_t count() const { return static_cast<int32_t>(held_.size()); }
  int32_t busy() const;

private:
  std::vector<bool> held_;
};

/// Where rank r runs: nodes[node], slot `slot`.
struct rank_placement {
  int32_t node = 0;
  int32_t slot = 0;
};

/// Ranks fill the nodes in the order given, each node's free slots in order. Errors: nodes of
/// different devices, or fewer free slots than `world` ranks (naming what each node offers).
expected<std::vector<rank_placement>> place_ranks(const std::vector<node_info>& nodes,
                                                  int32_t world);

} // namespace kvactor
