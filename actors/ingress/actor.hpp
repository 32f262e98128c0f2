// The ingress actor (kvactor serve): a thin shell over ingress_core. It takes the HTTP threads'
// calls from its inbox, submits their engine requests to the driver, answers clients from the
// driver's request_updates (it is the driver's output sink), and aborts the engine requests of a
// client that went away or of a choice a stop string ended. At shutdown it drains: new calls get
// 503, the ones in flight finish (or fail at the grace period's end), then the driver drains.
#pragma once

#include <memory>

#include "actors/ingress/counts_board.hpp"
#include "actors/ingress/inbox.hpp"
#include "actors/ingress/ingress_core.hpp"
#include "actors/interfaces.hpp"

namespace kvactor {

struct ingress_setup {
  openai::served_model model;
  openai::ingress_limits limits;
  driver_actor driver; // null: given by `start` once the engine is ready (with the vocabulary)
  std::shared_ptr<ingress_inbox> inbox;
  uint64_t seed = 0; // response ids and the draws of requests that give no seed
  std::shared_ptr<counts_board> board = nullptr; // where /metrics reads the counts; may be null
};

struct ingress_state {
  ingress_setup setup;                        // until the core is made
  std::unique_ptr<openai::ingress_core> core; // null until the driver is known
  driver_actor driver;
  std::shared_ptr<ingress_inbox> inbox;
  std::string drain_why;       // draining: why requests left at the deadline fail
  bool driver_drained = false; // the driver was told to drain
  static inline const char* name = "kvactor.ingress";
};

ingress_actor::behavior_type ingress(ingress_actor::stateful_pointer<ingress_state> self,
                                     ingress_setup setup);

} // namespace kvactor
