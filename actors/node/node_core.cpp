#include "actors/node/node_core.hpp"

#include <fmt/format.h>

#ifndef KVACTOR_GIT_COMMIT
#define KVACTOR_GIT_COMMIT "unknown"
#endif
#ifndef KVACTOR_VERSION
#define KVACTOR_VERSION "0.0.0"
#endif

namespace kvactor {

const std::string& kvactor_build_id() {
  static const std::string id = std::string(KVACTOR_VERSION) + "+g" + KVACTOR_GIT_COMMIT;
  return id;
}

status check_peer(const node_info& mine, uint32_t protocol, uint32_t schema,
                  const std::string& build) {
  auto differ = [](const char* what, const auto& ours, const auto& theirs) {
    return make_error(errc::incompatible_specs,
                      fmt::format("{}: the peer speaks {}, this process {}; run the same kvactor "
                                  "build on every node and the driver",
                                  what, theirs, ours));
  };
  if (protocol != mine.protocol) return differ("cluster protocol", mine.protocol, protocol);
  if (schema != mine.schema) return differ("message schema version", mine.schema, schema);
  if (build != mine.build) return differ("build", mine.build, build);
  return ok();
}

expected<std::pair<std::string, uint16_t>>
parse_host_port(const std::string& text, const std::string& flag, bool allow_any_port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return make_error(errc::invalid_argument, fmt::format("{}: '{}' is not HOST:PORT", flag, text));
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  long port = -1;
  try {
    size_t used = 0;
    port = std::stol(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < (allow_any_port ? 0 : 1) || port > 65535)
    return make_error(errc::invalid_argument,
                      fmt::format("{}: port '{}' of '{}' is not in [{}, 65535]", flag,
                                  text.substr(colon + 1), text, allow_any_port ? 0 : 1));
  return std::pair{host, static_cast<uint16_t>(port)};
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

status node_slots::claim(int32_t slot) {
  if (slot < 0 || slot >= count())
    return make_error(errc::invalid_argument,
                      fmt::format("slot: {} is outside this node's [0, {})", slot, count()));
  if (held_[static_cast<size_t>(slot)])
    return make_error(
        errc::invalid_argument,
        fmt::format("slot: {} holds a rank already (release the last run first)", slot));
  held_[static_cast<size_t>(slot)] = true;
  return ok();
}

void node_slots::free(int32_t slot) {
  if (slot >= 0 && slot < count()) held_[static_cast<size_t>(slot)] = false;
}

void node_slots::free_all() {
  held_.assign(held_.size(), false);
}

int32_t node_slots::busy() const {
  int32_t n = 0;
  for (bool b : held_)
    n += b ? 1 : 0;
  return n;
}

expected<std::vector<rank_placement>> place_ranks(const std::vector<node_info>& nodes,
                                                  int32_t world) {
  if (nodes.empty()) return make_error(errc::invalid_argument, "--nodes: no node given");
  if (world < 1)
    return make_error(errc::invalid_argument,
                      fmt::format("--tensor-parallel-size: {} is not positive", world));
  for (const auto& n : nodes)
    if (n.device != nodes.front().device)
      return make_error(errc::invalid_argument,
                        fmt::format("--nodes: {} hosts {} ranks, {} hosts {} ranks; one run uses "
                                    "one kind",
                                    nodes.front().address, to_string(nodes.front().device),
                                    n.address, to_string(n.device)));
  std::vector<rank_placement> out;
  std::string offers;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    const int32_t free_slots = n.slots - n.busy;
    offers += fmt::format("{}{} free of {} on {}", offers.empty() ? "" : ", ", free_slots, n.slots,
                          n.address);
    for (int32_t s = n.busy; s < n.slots && static_cast<int32_t>(out.size()) < world; ++s)
      out.push_back({static_cast<int32_t>(i), s});
  }
  if (static_cast<int32_t>(out.size()) < world)
    return make_error(errc::insufficient_memory,
                      fmt::format("--tensor-parallel-size {}: the nodes offer {} slot(s) ({})",
                                  world, out.size(), offers));
  return out;
}

} // namespace kvactor
