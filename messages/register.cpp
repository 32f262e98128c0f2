// GCC 12 at -O3 reports a false -Wmaybe-uninitialized inside CAF 0.17's data_processor::fill_range
// (deserializing std::vector<enum>); the code is in system headers, the warning lands here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "messages/register.hpp"

#include <string>

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include "messages/backend.hpp"
#include "messages/caf_error.hpp"
#include "messages/collective.hpp"
#include "messages/cudagraph.hpp"
#include "messages/errc.hpp"
#include "messages/inject.hpp"
#include "messages/kv.hpp"
#include "messages/layer.hpp"
#include "messages/node.hpp"
#include "messages/request.hpp"
#include "messages/runtime.hpp"
#include "messages/step.hpp"
#include "messages/type_ids.hpp"

namespace kvactor {

namespace {

/// "kvactor::invalid_split: <message>" (the context's string) or "kvactor::invalid_split".
std::string render_errc(uint8_t code, caf::atom_value, const caf::message& ctx) {
  std::string result = "kvactor::";
  result += to_string(static_cast<errc>(code));
  if (ctx.size() >= 1 && ctx.match_element<std::string>(0)) {
    result += ": ";
    result += ctx.get_as<std::string>(0);
  } else if (!ctx.empty()) {
    result += ' ';
    result += to_string(ctx);
  }
  return result;
}

} // namespace

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kvactor>();
  // NOTE(register): cfg.add_error_category<errc>(atom) does not compile in CAF 0.17.6.
  cfg.add_error_category(errc_category, render_errc);
}

} // namespace kvactor
