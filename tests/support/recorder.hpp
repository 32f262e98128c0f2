// The recorder: an actor that accepts and stores anything sent to it, errors included. Inject a
// request "as" the recorder (deterministic_fixture::inject) and its reply lands here, where the
// test peeks at it (expect_reply / expect_error) or reads the log afterwards.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/message.hpp>

namespace kvactor::test {

/// What a recorder received, in arrival order.
/// NOTE(recorder): read it only while the recorder is idle (deterministic tests, or after the
/// real-scheduler test received the reply that ends the exchange).
struct recording {
  struct entry {
    caf::strong_actor_ptr sender;
    caf::message content;
  };
  std::vector<entry> messages; // everything except errors
  std::vector<caf::error> errors;

  /// The last message of exactly type T, or nullptr.
  template <class T>
  const T* last() const {
    for (auto it = messages.rbegin(); it != messages.rend(); ++it)
      if (it->content.match_elements<T>()) return &it->content.get_as<T>(0);
    return nullptr;
  }
};

struct recorder_handle {
  caf::actor actor;
  std::shared_ptr<recording> log;
};

/// Spawns a recorder; it never replies and never quits on an error.
recorder_handle spawn_recorder(caf::actor_system& sys);

} // namespace kvactor::test
