// The driver as a server's engine, against mock ranks: it stays up while idle and serves what is
// submitted later; every request's tokens and end reach the outputs sink in order, once each; an
// abort fails a request with its reason and frees its blocks before the next step; a drain ends
// the run with the summary; a served request leaves no state behind.
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/mock_rank.hpp"
#include "tests/support/recorder.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

request_spec request(uint64_t id, int32_t max_tokens, int32_t logprobs = -1) {
  request_spec r{id, std::vector<int32_t>(8, static_cast<int32_t>(id)), max_tokens, 0};
  r.sampling.logprobs = logprobs;
  return r;
}

// What the sink heard of each request: its tokens in order and its last update.
struct heard {
  std::vector<int32_t> tokens;
  size_t logprobs = 0;
  int ends = 0;
  request_update last;
};

std::map<uint64_t, heard> heard_by_request(const recording& log) {
  std::map<uint64_t, heard> out;
  for (const auto& m : log.messages) {
    if (!m.content.match_elements<request_updates>()) continue;
    for (const auto& u : m.content.get_as<request_updates>(0).updates) {
      auto& h = out[u.request_id];
      EXPECT_EQ(h.ends, 0) << "request " << u.request_id << " was told of after its end";
      h.tokens.insert(h.tokens.end(), u.tokens.begin(), u.tokens.end());
      h.logprobs += u.logprobs.size();
      h.ends += u.done;
      h.last = u;
    }
  }
  return out;
}

class ServingDriver : public deterministic_fixture {
protected:
  recorder_handle rec = track(spawn_recorder(sys));
  recorder_handle sink = track(spawn_recorder(sys));
  mock_rank_handle rank = track(spawn_mock_rank(sys, canned_rank(0, 64)));

  // A started driver whose run began with `first` submitted (a finite run ends once they are).
  driver_actor serving_driver(bool keep_serving = true, std::vector<request_spec> first = {}) {
    driver_setup setup;
    setup.ranks.push_back(rank.actor);
    setup.configs.push_back(tiny_rank_config());
    setup.outputs = caf::actor_cast<output_sink_actor>(sink.actor);
    setup.keep_serving = keep_serving;
    auto drv = spawn(driver, std::move(setup));
    run_all();
    inject(rec.actor, drv, atom::start_v);
    run_all_but(rec.actor);
    EXPECT_TRUE(expect_reply<std::vector<rank_ready>>(drv, rec.actor));
    if (!first.empty()) submit(drv, std::move(first));
    inject(rec.actor, drv, atom::run_v);
    run_all();
    return drv;
  }

  void submit(const driver_actor& drv, std::vector<request_spec> specs) {
    inject(rec.actor, drv, atom::submit_v, std::move(specs));
    run_all();
  }

  // The run's summary once drained (everything run).
  const run_summary* drain(const driver_actor& drv) {
    inject(rec.actor, drv, atom::drain_v, std::string{"server stopped"});
    run_all();
    return rec.log->last<run_summary>();
  }
};

TEST_F(ServingDriver, StaysUpWhenIdleAndServesRequestsSubmittedLater) {
  auto drv = serving_driver();
  submit(drv, {request(1, 3), request(2, 2)});
  auto h = heard_by_request(*sink.log);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].tokens.size(), 3u);
  EXPECT_EQ(h[2].tokens.size(), 2u);
  EXPECT_TRUE(h[1].last.done && h[1].last.finished);
  EXPECT_EQ(h[1].last.reason, finish_reason::length);
  EXPECT_EQ(rec.log->last<run_summary>(), nullptr) << "an idle server's run does not end";
  submit(drv, {request(3, 4)}); // long after the first ones ended
  h = heard_by_request(*sink.log);
  EXPECT_EQ(h[3].tokens.size(), 4u);
  EXPECT_EQ(h[3].ends, 1);
  const auto* s = drain(drv);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->finished, 3);
  EXPECT_EQ(s->generated_tokens, 9);
  EXPECT_TRUE(s->results.empty()) << "a served request's state is dropped once told";
  EXPECT_EQ(s->kv_blocks_held_at_end, 0);
}

TEST_F(ServingDriver, TokensReachTheSinkAsEachStepIsAppliedWithTheirLogprobs) {
  auto drv = serving_driver();
  inject(rec.actor, drv, atom::submit_v, std::vector<request_spec>{request(1, 3, 2)});
  run_once(drv); // submit: step 0 (the prompt) goes to the rank
  run_once(rank.actor);
  run_once(drv); // step 0 applied: its token goes out before step 1 runs
  run_once(sink.actor);
  auto h = heard_by_request(*sink.log);
  EXPECT_EQ(h[1].tokens.size(), 1u);
  EXPECT_EQ(h[1].logprobs, 1u) << "the request asked for logprobs";
  EXPECT_EQ(h[1].ends, 0);
  run_all();
  h = heard_by_request(*sink.log);
  EXPECT_EQ(h[1].tokens.size(), 3u);
  EXPECT_EQ(h[1].logprobs, 3u);
  EXPECT_EQ(h[1].ends, 1);
}

TEST_F(ServingDriver, AnAbortFailsTheRequestWithItsReasonAndFreesItsBlocksBeforeTheNextStep) {
  auto drv = serving_driver();
  inject(rec.actor, drv, atom::submit_v, std::vector<request_spec>{request(1, 50)});
  run_once(drv);
  run_once(rank.actor);
  inject(rec.actor, drv, request_abort{1, "client disconnected"});
  run_once(drv); // step 0 applied; step 1 goes out
  run_once(drv); // the abort
  run_all();
  auto h = heard_by_request(*sink.log);
  EXPECT_EQ(h[1].ends, 1);
  EXPECT_FALSE(h[1].last.finished);
  EXPECT_EQ(h[1].last.failure, "client disconnected");
  EXPECT_LT(h[1].tokens.size(), 50u);
  // The ranks were told to drop it, and nothing is scheduled for it after.
  bool dropped = false;
  for (const auto& p : rank.log->steps) {
    for (const auto& s : p.scheduled)
      EXPECT_FALSE(dropped && s.request_id == 1) << "step " << p.seq << " after the drop";
    for (auto id : p.finished_requests)
      dropped = dropped || id == 1;
  }
  EXPECT_TRUE(dropped);
  const auto* s = drain(drv);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->failed, 1);
  EXPECT_EQ(s->kv_blocks_held_at_end, 0) << "an aborted request holds no block";
}

TEST_F(ServingDriver, AnAbortOfARequestNotYetAdmittedOrAlreadyDoneIsHarmless) {
  auto drv = serving_driver();
  submit(drv, {request(1, 2)});
  inject(rec.actor, drv, request_abort{1, "too late"});
  inject(rec.actor, drv, request_abort{77, "never submitted"});
  run_all();
  auto h = heard_by_request(*sink.log);
  EXPECT_TRUE(h[1].last.finished) << "a request already done stays done";
  EXPECT_EQ(h.count(77), 0u);
  submit(drv, {request(2, 2)});
  EXPECT_EQ(heard_by_request(*sink.log)[2].ends, 1) << "the driver serves on";
}

TEST_F(ServingDriver, ADrainFailsWhatIsInFlightWithTheReasonAndAnswersRun) {
  auto drv = serving_driver();
  inject(rec.actor, drv, atom::submit_v, std::vector<request_spec>{request(1, 50)});
  run_once(drv); // step 0 goes to the rank, which has not answered yet
  inject(rec.actor, drv, atom::drain_v, std::string{"server stopped"});
  run_once(drv);
  run_all();
  const auto* s = rec.log->last<run_summary>();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->failed, 1);
  auto h = heard_by_request(*sink.log);
  EXPECT_EQ(h[1].ends, 1);
  EXPECT_EQ(h[1].last.failure, "server stopped");
}

TEST_F(ServingDriver, AFiniteRunWithASinkEndsAsBeforeAndKeepsItsResults) {
  serving_driver(false, {request(1, 3)});
  const auto* s = rec.log->last<run_summary>();
  ASSERT_NE(s, nullptr) << "without keep_serving the run ends once all is served";
  ASSERT_EQ(s->results.size(), 1u);
  EXPECT_EQ(heard_by_request(*sink.log)[1].tokens, s->results[0].output);
}

} // namespace
} // namespace kvactor::test
