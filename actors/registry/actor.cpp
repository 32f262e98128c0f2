#include "actors/registry/actor.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>

#include "actors/registry/assignment.hpp"
#include "actors/unexpected.hpp"
#include "messages/caf_error.hpp"

namespace kvactor {

registry_actor::behavior_type registry(registry_actor::stateful_pointer<registry_state> self,
                                       std::vector<backend_capabilities> extra) {
  refuse_unexpected(self);
  self->state.backends = backend_registry::with_builtins();
  for (auto& b : extra)
    if (auto ok = self->state.backends.add(std::move(b)); !ok) {
      self->quit(to_caf_error(ok.err()));
      return registry_actor::behavior_type::make_empty_behavior();
    }
  return {
      [self](atom::assign, const model_layout& model, const std::vector<kv_cache_group>& groups,
             device_kind device, const std::string& preferred) -> caf::result<backend_assignment> {
        if (to_string(device) == "unknown")
          return to_caf_error(
              make_error(errc::invalid_argument,
                         fmt::format("device: {} is not a device", static_cast<int>(device))));
        auto out = assign_backends(self->state.backends, model, groups, device, preferred);
        if (!out) return to_caf_error(out.err());
        return std::move(*out);
      },
      [self](atom::backends) -> std::vector<backend_capabilities> {
        std::vector<backend_capabilities> out;
        for (const auto& name : self->state.backends.names())
          out.push_back(*self->state.backends.find(name));
        return out;
      },
  };
}

} // namespace kvactor
