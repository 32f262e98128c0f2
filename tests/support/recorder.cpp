#include "tests/support/recorder.hpp"

#include <caf/all.hpp>

namespace kvactor::test {

namespace {

struct never_sent {}; // the behavior needs one handler; everything arrives via the default one

caf::behavior recorder(caf::event_based_actor* self, std::shared_ptr<recording> log) {
  self->set_default_handler(
      [log](caf::scheduled_actor* s, caf::message_view& x) -> caf::result<caf::message> {
        auto msg = x.move_content_to_message();
        if (msg.match_elements<caf::error>())
          log->errors.push_back(msg.get_as<caf::error>(0));
        else
          log->messages.push_back({s->current_sender(), std::move(msg)});
        return caf::message{}; // nothing to reply
      });
  self->set_error_handler([log](caf::error& err) { log->errors.push_back(err); });
  return {[](never_sent) {}};
}

} // namespace

recorder_handle spawn_recorder(caf::actor_system& sys) {
  auto log = std::make_shared<recording>();
  return {sys.spawn(recorder, log), log};
}

} // namespace kvactor::test
