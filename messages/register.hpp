// One call that makes an actor system able to send, receive and render kvactor's messages.
#pragma once

#include <caf/fwd.hpp>

namespace kvactor {

/// Adds every type of the kvactor type-ID block (messages/type_ids.hpp) and the renderer of the
/// "kvactor" error category (errc names in sys.render(err)). Call it in every actor system's
/// config, in deploy/ and in tests alike; both ends of a remote connection need it.
void register_types(caf::actor_system_config& cfg);

} // namespace kvactor
