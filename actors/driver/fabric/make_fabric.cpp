#include "actors/driver/fabric/make_fabric.hpp"

#include "actors/driver/actor.hpp"
#include "actors/driver/fabric/chaos_fabric.hpp"
#include "actors/driver/fabric/local_fabric.hpp"
#include "actors/driver/fabric/node_fabric.hpp"

namespace kvactor {

// Under --chaos a cluster run's steps go to each rank itself, not through its node: the links
// disturb each rank's messages.
std::unique_ptr<rank_fabric> make_rank_fabric(fabric_host& host, const driver_setup& setup) {
  const auto& d = setup.deadlines;
  if (setup.chaos)
    return std::make_unique<chaos_fabric>(
        host, std::make_unique<local_fabric>(host, setup.ranks, d), *setup.chaos, d);
  if (setup.routes.empty()) return std::make_unique<local_fabric>(host, setup.ranks, d);
  if (setup.channel)
    return std::make_unique<channel_fabric>(host, setup.ranks.size(), setup.routes, d,
                                            setup.channel);
  return std::make_unique<node_fabric>(host, setup.ranks.size(), setup.routes, d);
}

} // namespace kvactor
