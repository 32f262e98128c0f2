// The fabric a driver's setup asks for: --chaos links around ranks it sends to itself; else its
// nodes, on their step channels when it has them; else its ranks directly.
#pragma once

#include <memory>

#include "actors/driver/fabric/rank_fabric.hpp"

namespace kvactor {

struct driver_setup;

std::unique_ptr<rank_fabric> make_rank_fabric(fabric_host& host, const driver_setup& setup);

} // namespace kvactor
