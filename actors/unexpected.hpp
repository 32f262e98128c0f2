// What every kvactor actor does with a message it has no handler for. CAF's default prints the
// message in full and drops it; printing some CAF types built from a peer's bytes crashes the
// process (a caf::duration with an out-of-range unit: found by fuzzing). So: name the actor and
// the number of values, never the contents, and answer with CAF's unexpected_message error.
#pragma once

#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <caf/message_view.hpp>
#include <caf/result.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/sec.hpp>
#include <spdlog/spdlog.h>

namespace kvactor {

inline caf::result<caf::message> drop_unexpected(caf::scheduled_actor* self, caf::message_view& x) {
  spdlog::warn("{}: dropped an unexpected message of {} value(s)", self->name(),
               x.content().size());
  return caf::sec::unexpected_message;
}

/// Installs drop_unexpected as `self`'s default handler.
template <class Self>
void refuse_unexpected(Self* self) {
  self->set_default_handler(drop_unexpected);
}

} // namespace kvactor
