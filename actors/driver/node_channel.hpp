// A path for steps beside CAF's middleman (cluster mode). The driver writes each node's step to it
// from its own thread, and its reader thread sends the node's answer back to the driver as a
// node_channel_event. The sockets live in net (step_channel_client); the driver sees
// only this interface, so its tests may give it any path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "messages/errc.hpp"
#include "messages/node.hpp"

namespace kvactor {

class node_step_channel {
public:
  virtual ~node_step_channel() = default;
  /// Whether route `route`'s node has an open channel.
  virtual bool open(size_t route) const = 0;
  /// Sends step `seq` to route `route`'s node; an error means the channel is closed (the step
  /// then goes through the middleman).
  virtual status send(size_t route, uint64_t seq, const node_step& step) = 0;
};

} // namespace kvactor
