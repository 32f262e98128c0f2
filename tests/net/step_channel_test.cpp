// The step channel on loopback: a driver's step reaches the node actor and its answer or refusal
// comes back as an event; a run whose steps take the channel serves the tokens of one whose steps
// take the middleman; a lost channel hands its step to the middleman; and connections that do not
// prove the cookie, or send a frame the node refuses, are closed while the node serves the next.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/node/actor.hpp"
#include "messages/codec.hpp"
#include "net/step_channel_client.hpp"
#include "net/step_channel_server.hpp"
#include "net/step_frame.hpp"
#include "net/step_socket.hpp"
#include "net/tcp_probe.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/node_fixture.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

constexpr const char* cookie = "a cookie of the step channel tests, 32+ bytes long";
constexpr std::chrono::seconds event_timeout{30};

// The events a client reports, awaited one by one (never a sleep).
class event_queue {
public:
  step_channel_client::sink sink() {
    return [this](node_channel_event e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
      cv_.notify_all();
    };
  }
  std::optional<node_channel_event> next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, event_timeout, [this] { return !events_.empty(); })) {
      ADD_FAILURE() << "no step channel event within " << event_timeout.count() << " s";
      return std::nullopt;
    }
    auto e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<node_channel_event> events_;
};

// Polls `done` until it holds or the event timeout passes: for counters a server thread updates.
template <class Done>
bool eventually(Done done) {
  const auto until = std::chrono::steady_clock::now() + event_timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

class StepChannel : public node_system_fixture {
protected:
  struct served_node {
    node_actor node;
    std::unique_ptr<step_channel_server> server;
  };

  /// A node with `slots` CPU slots behind a step channel.
  served_node make_served_node(int32_t slots, step_channel_limits limits = {}) {
    auto server = step_channel_server::listen("127.0.0.1", 0, {cookie, nullptr}, limits);
    EXPECT_TRUE(server) << server.err().message;
    if (!server) return {};
    auto n = make_node(slots, (*server)->sinks());
    (*server)->serve(n);
    return {n, std::move(*server)};
  }

  std::shared_ptr<step_channel_client> connect_to(const step_channel_server& server,
                                                  const std::string& with = cookie) {
    auto c = step_channel_client::connect({{"127.0.0.1", server.port()}}, {with, nullptr}, 1 << 20,
                                          std::chrono::seconds(10));
    EXPECT_TRUE(c->open(0)) << c->why(0);
    return c;
  }

  /// Step `seq` of an unconfigured group for `slots`, sent on a fresh channel: what comes back.
  std::optional<node_channel_event> first_event_of(const step_channel_server& server, uint64_t seq,
                                                   std::vector<int32_t> slots) {
    event_queue events; // outlives the client, whose reader thread feeds it
    auto client = connect_to(server);
    client->start(events.sink());
    step_plan plan;
    plan.seq = seq;
    plan.epoch = 1;
    EXPECT_TRUE(client->send(0, seq, node_step{encode(plan), std::move(slots), 0}));
    auto e = events.next();
    if (e && e->kind != channel_event_kind::lost) {
      EXPECT_TRUE(client->open(0));
    }
    return e;
  }
};

// Reads what the node still sends (its greeting) until it closes the connection.
void expect_closed_by_node(step_socket& s) {
  char buf[256];
  for (;;) {
    auto r = s.read_some(buf, sizeof buf, std::chrono::seconds(10));
    ASSERT_TRUE(r) << r.err().message;
    if (*r == 0) return;
  }
}

TEST_F(StepChannel, AStepReachesTheNodeAndItsAnswerComesBackForEveryRank) {
  auto [n, server] = make_served_node(2);
  spawn_rank_on(n, 0, 2, 0);
  spawn_rank_on(n, 1, 2, 1);
  // Ranks not yet configured refuse every step: both refusals come back in the node's answer.
  auto e = first_event_of(*server, 0, {0, 1});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, channel_event_kind::answer);
  EXPECT_EQ(e->route, 0);
  EXPECT_EQ(e->seq, 0u);
  EXPECT_EQ(e->answer.rejected.size(), 2u);
  EXPECT_EQ(server->counts().steps.load(), 1u);
}

TEST_F(StepChannel, ThreadsThatSpinBeforeTheyBlockServeStepsAsThoseThatBlock) {
  step_channel_limits spinning;
  spinning.spin = std::chrono::microseconds(2000);
  auto [n, server] = make_served_node(1, spinning);
  spawn_rank_on(n, 0, 1, 0);
  event_queue events;
  auto client = connect_to(*server);
  client->start(events.sink(), std::chrono::microseconds(2000));
  // Several steps, some sent while both threads spin and some after they have gone to sleep.
  for (uint64_t seq = 0; seq < 4; ++seq) {
    step_plan plan;
    plan.seq = seq;
    plan.epoch = 1;
    ASSERT_TRUE(client->send(0, seq, node_step{encode(plan), {0}, 0}));
    auto e = events.next();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, channel_event_kind::answer);
    EXPECT_EQ(e->seq, seq);
    EXPECT_EQ(e->answer.rejected.size(), 1u);
    if (seq == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5)); // past the spin
  }
  EXPECT_EQ(server->counts().steps.load(), 4u);
}

TEST(StepSocket, SpinningReportsADescriptorThatBecomesReadableAndGivesUpOnASilentOne) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pollfd p{fds[0], POLLIN, 0};
  EXPECT_FALSE(spin_until_readable(&p, 1, std::chrono::microseconds(200))) << "nothing written";
  EXPECT_FALSE(spin_until_readable(&p, 1, std::chrono::microseconds(0))) << "no spin asked for";
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  EXPECT_TRUE(spin_until_readable(&p, 1, std::chrono::microseconds(200)));
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_F(StepChannel, ANodesRefusalComesBackWithTheStepAndTheReason) {
  auto [n, server] = make_served_node(2);
  spawn_rank_on(n, 0, 1, 0);
  auto e = first_event_of(*server, 7, {0, 1});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, channel_event_kind::refusal);
  EXPECT_EQ(e->seq, 7u);
  EXPECT_NE(e->why.message.find("slot 1 hosts no rank"), std::string::npos) << e->why.message;
}

TEST_F(StepChannel, ADriverWithAnotherCookieIsRefusedAndTheNodeServesTheNext) {
  auto [n, server] = make_served_node(1);
  auto wrong = step_channel_client::connect({{"127.0.0.1", server->port()}},
                                            {"another cookie of 32 bytes or more....", nullptr},
                                            1 << 20, std::chrono::seconds(10));
  EXPECT_FALSE(wrong->open(0)); // its steps would take the middleman
  EXPECT_NE(wrong->why(0).find("127.0.0.1:"), std::string::npos) << wrong->why(0);
  EXPECT_TRUE(eventually([&] { return server->counts().refused_auth.load() == 1; }));
  EXPECT_TRUE(connect_to(*server)->open(0));
}

TEST_F(StepChannel, GarbageBeforeTheProofClosesThatConnectionOnly) {
  auto [n, server] = make_served_node(1);
  auto fd = tcp_connect("127.0.0.1", server->port(), std::chrono::seconds(5));
  ASSERT_TRUE(fd) << fd.err().message;
  step_socket raw{*fd};
  const std::string garbage(200, 'G');
  ASSERT_TRUE(raw.write_all(garbage.data(), garbage.size()));
  expect_closed_by_node(raw);
  EXPECT_TRUE(eventually([&] { return server->counts().refused_auth.load() == 1; }));
  EXPECT_TRUE(connect_to(*server)->open(0));
}

TEST_F(StepChannel, AnOversizedFrameAfterTheProofIsRefusedBeforeItIsRead) {
  step_channel_limits limits;
  limits.max_frame_bytes = 4096;
  auto [n, server] = make_served_node(1, limits);
  auto fd = tcp_connect("127.0.0.1", server->port(), std::chrono::seconds(5));
  ASSERT_TRUE(fd) << fd.err().message;
  step_socket raw{*fd};
  ASSERT_TRUE(prove_cookie(raw, connection_side::connected, cookie, std::chrono::seconds(10)));
  const char huge[] = {'\x7f', '\xff', '\xff', '\xff', '\x01', '\x01'};
  ASSERT_TRUE(raw.write_all(huge, sizeof huge));
  char buf[16];
  auto r = raw.read_some(buf, sizeof buf, std::chrono::seconds(10));
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(*r, 0u); // closed
  EXPECT_TRUE(eventually([&] { return server->counts().refused_frames.load() == 1; }));
  EXPECT_TRUE(connect_to(*server)->open(0));
}

// Two drivers at once on a node that serves one: the node keeps one and closes the other. Which
// one is a race: the second is closed at accept when the first is proven by then, but the first's
// proof may still be finishing on the node's side when the second's ends (its driver returns
// from connect once its own side is done), and then the first is the one closed.
TEST_F(StepChannel, ConnectionsBeyondTheBoundAreClosed) {
  step_channel_limits limits;
  limits.max_connections = 1;
  auto [n, server] = make_served_node(1, limits);
  event_queue first_events, second_events; // outlive the clients, whose readers feed them
  auto first = connect_to(*server);
  first->start(first_events.sink());
  auto second = step_channel_client::connect({{"127.0.0.1", server->port()}}, {cookie, nullptr},
                                             1 << 20, std::chrono::seconds(10));
  const bool second_proven = second->open(0);
  if (second_proven) second->start(second_events.sink());
  EXPECT_TRUE(eventually([&] { return server->counts().refused_full.load() == 1; }));
  ASSERT_TRUE(eventually([&] { return first->open(0) != second->open(0); }))
      << "the node kept both connections, or closed both";
  const bool first_kept = first->open(0);
  if (!first_kept || second_proven) { // a connection that was running reports its loss
    auto lost = (first_kept ? second_events : first_events).next();
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->kind, channel_event_kind::lost);
  }
  // The one kept is served: a step on it is answered or refused, not lost.
  auto& kept = first_kept ? first : second;
  step_plan plan;
  plan.seq = 1;
  plan.epoch = 1;
  ASSERT_TRUE(kept->send(0, 1, node_step{encode(plan), {0}, 0}));
  auto e = (first_kept ? first_events : second_events).next();
  ASSERT_TRUE(e);
  EXPECT_NE(e->kind, channel_event_kind::lost) << e->why.message;
}

TEST_F(StepChannel, SilentConnectionsBeyondThePendingBoundEvictTheOldestNotTheDriver) {
  step_channel_limits limits;
  limits.max_pending = 2;
  auto [n, server] = make_served_node(1, limits);
  std::vector<std::unique_ptr<step_socket>> silent;
  for (int i = 0; i < 3; ++i) {
    auto fd = tcp_connect("127.0.0.1", server->port(), std::chrono::seconds(5));
    ASSERT_TRUE(fd) << fd.err().message;
    silent.push_back(std::make_unique<step_socket>(*fd));
    // Admitted once its greeting arrives: the next connection then finds it pending.
    char greeting[40];
    auto r = silent.back()->read_some(greeting, sizeof greeting, std::chrono::seconds(10));
    ASSERT_TRUE(r) << r.err().message;
  }
  expect_closed_by_node(*silent.front());
  EXPECT_EQ(server->counts().evicted.load(), 1u);
  EXPECT_TRUE(connect_to(*server)->open(0)); // evicts the next oldest, and is served
}

TEST_F(StepChannel, ANodeThatGoesAwayIsReportedLostOnce) {
  auto [n, server] = make_served_node(1);
  event_queue events;
  auto client = connect_to(*server);
  client->start(events.sink());
  server.reset();
  auto e = events.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, channel_event_kind::lost);
  EXPECT_FALSE(client->open(0));
  EXPECT_FALSE(client->send(0, 1, node_step{}));
}

// A path that takes every step and then reports itself lost, as a connection cut right after the
// write would: the driver must serve the step through the middleman.
class lost_after_send : public node_step_channel {
public:
  bool open(size_t) const override { return !lost_; }
  status send(size_t route, uint64_t, const node_step&) override {
    lost_ = true;
    node_channel_event e;
    e.route = static_cast<int32_t>(route);
    e.kind = channel_event_kind::lost;
    e.why = make_error(errc::io_error, "cut by the test");
    caf::anon_send(driver_, std::move(e));
    return ok();
  }
  driver_actor driver_;
  bool lost_ = false;
};

TEST_F(StepChannel, ARunOnTheChannelServesTheTokensOfARunThroughTheMiddleman) {
  auto serve_run = [&](int path) {
    auto [n, server] = make_served_node(1);
    auto r = spawn_rank_on(n, 0, 1, 0);
    std::shared_ptr<step_channel_client> client;
    auto dropping = std::make_shared<lost_after_send>();
    driver_setup setup;
    setup.ranks = {r};
    setup.configs = {tiny_rank_config()};
    setup.bootstrap_communicator = true;
    setup.routes = {node_route{n, {0}, {0}}};
    if (path == 1) {
      client = connect_to(*server);
      setup.channel = client;
    } else if (path == 2) {
      setup.channel = dropping;
    }
    auto drv = spawn(driver, std::move(setup));
    dropping->driver_ = drv;
    if (client) client->start([drv](node_channel_event e) { caf::anon_send(drv, std::move(e)); });
    EXPECT_TRUE(request_within<std::vector<rank_ready>>(drv, atom::start_v));
    EXPECT_TRUE(request_within<int64_t>(drv, atom::submit_v, tiny_six_requests()));
    auto summary = request_within<run_summary>(drv, atom::run_v);
    EXPECT_TRUE(summary) << message_of(summary.error());
    if (path == 1) { // every step took the channel
      EXPECT_GT(summary->steps, 0);
      EXPECT_GE(server->counts().steps.load(), static_cast<uint64_t>(summary->steps));
    }
    caf::anon_send_exit(drv, caf::exit_reason::kill);
    return summary ? *summary : run_summary{};
  };
  const auto middleman = serve_run(0);
  const auto channel = serve_run(1);
  const auto fell_back = serve_run(2);
  EXPECT_EQ(middleman.finished, 6);
  EXPECT_FALSE(middleman.output_digest.empty());
  EXPECT_EQ(channel.finished, 6);
  EXPECT_EQ(channel.output_digest, middleman.output_digest);
  EXPECT_EQ(fell_back.finished, 6);
  EXPECT_EQ(fell_back.output_digest, middleman.output_digest);
}

} // namespace
} // namespace kvactor::test
