// The real-scheduler fixture for end-to-end tests: a normal actor system, a scoped_actor that
// requests and waits, always with a bounded timeout, so that a lost reply fails the test instead
// of hanging it.
#pragma once

#include <chrono>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>

#include "messages/register.hpp"
#include "tests/support/deterministic_fixture.hpp"

namespace kvactor::test {

struct real_config : caf::actor_system_config {
  real_config() {
    set("scheduler.max-threads", 2);
    register_types(*this);
  }
};

class real_system_fixture : public ::testing::Test {
protected:
  /// How long any single request may take before the test fails.
  static constexpr std::chrono::seconds reply_timeout{30};

  real_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys, true};

  real_system_fixture() { quiet_logs(); }

  /// Stops everything spawned through spawn(), so the system never waits on a stuck actor.
  ~real_system_fixture() override {
    for (auto& a : spawned_)
      caf::anon_send_exit(a, caf::exit_reason::kill);
  }

  /// sys.spawn, remembering the actor so that the fixture stops it at the end.
  template <class... Ts>
  auto spawn(Ts&&... xs) {
    auto h = sys.spawn(std::forward<Ts>(xs)...);
    spawned_.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  }

  /// Requests `xs...` from `h` and waits at most reply_timeout for a T. A timeout is a test
  /// failure and returns sec::request_timeout; an error reply is returned as is.
  template <class T, class Handle, class... Ts>
  caf::expected<T> request_within(const Handle& h, Ts&&... xs) {
    caf::expected<T> out{caf::sec::request_timeout};
    self->request(h, reply_timeout, std::forward<Ts>(xs)...)
        .receive([&](T& x) { out = std::move(x); },
                 [&](caf::error& err) {
                   if (err == caf::sec::request_timeout)
                     ADD_FAILURE() << "no reply from " << actor_name(h) << " within "
                                   << reply_timeout.count() << " s";
                   out = std::move(err);
                 });
    return out;
  }

private:
  std::vector<caf::actor> spawned_;
};

} // namespace kvactor::test
