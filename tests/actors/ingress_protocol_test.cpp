// The ingress actor between HTTP threads (its inbox) and the driver (a recorder here): a call
// becomes a submit to the driver and its client is answered from the driver's updates; a client
// that leaves becomes request_aborts; a drain refuses what comes after, lets what is in flight
// finish for a grace period, then stops the driver.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/ingress/actor.hpp"
#include "tests/ingress/llama3_tokenizer.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/recorder.hpp"

namespace kvactor::test {
namespace {

struct recording_client final : openai::client {
  int status = 0;
  std::string body;
  void respond(int s, std::string b) override {
    status = s;
    body = std::move(b);
  }
  void begin_stream() override {}
  void send(std::string) override {}
  void end_stream() override {}
};

// What the stand-in driver was sent.
struct driver_log {
  std::vector<request_spec> submitted;
  std::vector<request_abort> aborts;
  std::vector<std::string> drains;
};

// A driver that accepts every submission (answering the count) and records aborts.
caf::behavior stand_in_driver(caf::event_based_actor*, std::shared_ptr<driver_log> log) {
  return {
      [log](atom::submit, std::vector<request_spec>& specs) -> int64_t {
        log->submitted.insert(log->submitted.end(), specs.begin(), specs.end());
        return static_cast<int64_t>(log->submitted.size());
      },
      [log](request_abort& a) { log->aborts.push_back(a); },
      [log](atom::drain, std::string& why) { log->drains.push_back(why); },
  };
}

class IngressProtocol : public deterministic_fixture {
protected:
  std::shared_ptr<driver_log> log = std::make_shared<driver_log>();
  caf::actor drv = spawn(stand_in_driver, log);
  std::shared_ptr<ingress_inbox> inbox = std::make_shared<ingress_inbox>();
  std::shared_ptr<counts_board> board = std::make_shared<counts_board>();
  ingress_actor ing = spawn(
      ingress,
      ingress_setup{tiny_served_model(), {}, caf::actor_cast<driver_actor>(drv), inbox, 1, board});

  ~IngressProtocol() override {
    caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(ing, caf::exit_reason::user_shutdown);
    run_all();
  }

  std::shared_ptr<recording_client> call(const std::string& body) {
    auto c = std::make_shared<recording_client>();
    if (inbox->push(ingress_call{openai::endpoint::completions, body, c}))
      caf::anon_send(ing, atom::wake_v);
    run_all();
    return c;
  }

  const std::vector<request_spec>& submitted() const { return log->submitted; }
  const std::vector<request_abort>& aborts() const { return log->aborts; }
  const std::vector<std::string>& drains() const { return log->drains; }

  void finish(uint64_t request_id) {
    request_update u{request_id, {339}};
    u.done = u.finished = true;
    u.reason = finish_reason::length;
    caf::anon_send(ing, request_updates{{u}});
    run_all();
  }
};

TEST_F(IngressProtocol, ACallIsSubmittedToTheDriverAndAnsweredFromItsUpdates) {
  auto c = call(R"({"prompt": "Hello", "max_tokens": 1})");
  const auto specs = submitted();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(c->status, 0);
  request_update u{specs[0].request_id, {339}};
  u.done = u.finished = true;
  u.reason = finish_reason::length;
  caf::anon_send(ing, request_updates{{u}});
  run_all();
  EXPECT_EQ(c->status, 200);
  EXPECT_EQ(nlohmann::json::parse(c->body)["choices"][0]["text"], " world");
}

TEST_F(IngressProtocol, ABadCallIsAnsweredWithoutReachingTheDriver) {
  auto c = call(R"({"prompt": ""})");
  EXPECT_EQ(c->status, 400);
  EXPECT_TRUE(submitted().empty());
}

TEST_F(IngressProtocol, AClientThatLeavesHasItsEngineRequestsAborted) {
  auto c = call(R"({"prompt": "Hello", "n": 2})");
  ASSERT_EQ(submitted().size(), 2u);
  if (inbox->push(ingress_disconnect{c})) caf::anon_send(ing, atom::wake_v);
  run_all();
  const auto a = aborts();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].reason, "the client disconnected");
}

TEST_F(IngressProtocol, SeveralCallsQueuedTogetherNeedOneWake) {
  auto first = std::make_shared<recording_client>();
  auto second = std::make_shared<recording_client>();
  EXPECT_TRUE(
      inbox->push(ingress_call{openai::endpoint::completions, R"({"prompt": "a"})", first}));
  EXPECT_FALSE(
      inbox->push(ingress_call{openai::endpoint::completions, R"({"prompt": "b"})", second}));
  caf::anon_send(ing, atom::wake_v);
  run_all();
  EXPECT_EQ(submitted().size(), 2u);
}

TEST_F(IngressProtocol, ADrainRefusesNewCallsAndStopsTheDriverOnceTheLastInFlightEnds) {
  auto waiting = call(R"({"prompt": "Hello", "max_tokens": 1})");
  caf::anon_send(ing, atom::drain_v, caf::timespan{std::chrono::seconds(30)},
                 std::string{"the shutdown timeout passed"});
  run_all();
  EXPECT_EQ(call(R"({"prompt": "x"})")->status, 503);
  EXPECT_EQ(waiting->status, 0) << "a request in flight goes on during the grace period";
  EXPECT_TRUE(drains().empty());
  finish(submitted().at(0).request_id);
  EXPECT_EQ(waiting->status, 200);
  ASSERT_EQ(drains().size(), 1u);
  EXPECT_EQ(drains()[0], "the server is shutting down");
}

TEST_F(IngressProtocol, AtTheEndOfTheGracePeriodTheDriverDrainsAndWhatIsLeftFailsWithTheReason) {
  auto waiting = call(R"({"prompt": "Hello"})");
  caf::anon_send(ing, atom::drain_v, caf::timespan{std::chrono::seconds(1)},
                 std::string{"the shutdown timeout passed"});
  run_all();
  EXPECT_EQ(waiting->status, 0);
  sched.trigger_timeouts();
  run_all();
  EXPECT_EQ(waiting->status, 503);
  EXPECT_NE(waiting->body.find("the shutdown timeout passed"), std::string::npos);
  ASSERT_EQ(drains().size(), 1u) << "the driver is told once";
  EXPECT_EQ(drains()[0], "the shutdown timeout passed");
}

TEST_F(IngressProtocol, ADrainWithNothingInFlightStopsTheDriverAtOnce) {
  caf::anon_send(ing, atom::drain_v, caf::timespan{std::chrono::seconds(30)}, std::string{});
  run_all();
  EXPECT_EQ(drains().size(), 1u);
}

TEST_F(IngressProtocol, ItsCountsArePublishedAfterEachMessageAndItTellsWhatIsInFlight) {
  auto waiting = call(R"({"prompt": "Hello", "max_tokens": 1})");
  EXPECT_EQ(board->read().in_flight, 1);
  EXPECT_EQ(call(R"({"prompt": ""})")->status, 400);
  EXPECT_EQ(board->read().by_status.at(400), 1);
  auto rec = spawn_recorder(sys);
  inject(rec.actor, ing, atom::stats_v);
  run_once(ing);
  EXPECT_EQ(expect_reply<int64_t>(ing, rec.actor), 1);
  caf::anon_send_exit(rec.actor, caf::exit_reason::user_shutdown);
  finish(submitted().at(0).request_id);
  EXPECT_EQ(board->read().in_flight, 0);
  EXPECT_EQ(board->read().by_status.at(200), 1);
}

} // namespace
} // namespace kvactor::test
