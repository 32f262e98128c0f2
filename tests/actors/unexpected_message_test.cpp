// A message an actor has no handler for is refused with CAF's unexpected_message error and never
// printed: CAF's default prints it in full, and printing some values a peer's bytes can hold
// crashes the process (a caf::duration whose unit is out of range: found by fuzzing a node).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include <caf/all.hpp>

#include "actors/cudagraph/actor.hpp"
#include "actors/registry/actor.hpp"
#include "actors/spawn_plain.hpp"
#include "messages/register.hpp"

namespace kvactor::test {
namespace {

using namespace std::chrono_literals;

caf::duration unprintable() {
  caf::duration d;
  d.unit = static_cast<caf::time_unit>(0x40000000); // CAF indexes a name table with it
  d.count = 1;
  return d;
}

std::optional<caf::error> ask(caf::actor_system& sys, const caf::actor& whom) {
  caf::scoped_actor self{sys};
  std::optional<caf::error> got;
  self->request(whom, 10s, unprintable())
      .receive([&](int32_t) { ADD_FAILURE() << "an unexpected message was answered"; },
               [&](caf::error& e) { got = e; });
  return got;
}

TEST(UnexpectedMessages, AreRefusedWithoutBeingPrinted) {
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  const caf::actor actors[] = {
      caf::actor_cast<caf::actor>(sys.spawn(registry, std::vector<backend_capabilities>{})),
      caf::actor_cast<caf::actor>(sys.spawn(plain<&cudagraph>, nullptr)),
  };
  for (const auto& a : actors) {
    auto got = ask(sys, a);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, caf::sec::unexpected_message);
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
}

} // namespace
} // namespace kvactor::test
