// A node actor with CPU ranks in the test's own actor system: what the node relay and step
// channel tests start from. The ranks it spawns are stopped when the test ends.
#pragma once

#include <vector>

#include <caf/all.hpp>

#include "actors/node/actor.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/real_system_fixture.hpp"

namespace kvactor::test {

class node_system_fixture : public real_system_fixture {
protected:
  /// `sinks`: where the node answers steps that came on a step channel (none by default).
  node_actor make_node(int32_t slots, std::shared_ptr<step_sinks> sinks = nullptr) {
    node_setup setup;
    setup.info.device = device_kind::cpu;
    setup.info.slots = slots;
    setup.socket_host = "127.0.0.1";
    setup.sinks = std::move(sinks);
    return spawn(node, setup);
  }

  rank_actor spawn_rank_on(const node_actor& n, int32_t rank, int32_t world, int32_t slot) {
    auto h = request_within<caf::strong_actor_ptr>(n, atom::spawn_v,
                                                   rank_spawn{rank, world, slot, 30'000});
    EXPECT_TRUE(h) << message_of(h.error());
    auto r = caf::actor_cast<rank_actor>(h ? *h : nullptr);
    ranks_.push_back(caf::actor_cast<caf::actor>(r));
    return r;
  }

  ~node_system_fixture() override {
    for (auto& a : ranks_)
      caf::anon_send_exit(a, caf::exit_reason::kill);
  }

private:
  std::vector<caf::actor> ranks_;
};

} // namespace kvactor::test
