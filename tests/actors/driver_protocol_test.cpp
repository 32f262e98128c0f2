// Driver protocol against mock ranks: start (configure every rank, the minimum block count,
// allocate), submit, run; a rank that rejects a step naming a request; a rank that dies; a failed
// collective, diagnosed from every ledger and quoting the timed-out rank whenever its error comes.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/driver/node_channel.hpp"
#include "messages/codec.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/mock_rank.hpp"
#include "tests/support/recorder.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;

// Requests 1..n with 8-token prompts and 3 output tokens, all arriving at once.
std::vector<request_spec> requests(uint64_t n) {
  std::vector<request_spec> out;
  for (uint64_t id = 1; id <= n; ++id)
    out.push_back({id, std::vector<int32_t>(8, static_cast<int32_t>(id)), 3, 0});
  return out;
}

bool schedules(const step_plan& p, uint64_t id) {
  return std::any_of(p.scheduled.begin(), p.scheduled.end(),
                     [id](const scheduled_request& s) { return s.request_id == id; });
}

// A mock rank that answers every step but step 1, which it fails with collective error `why`,
// and whose collective ledger then reads `ledger`.
mock_rank_script failing_step_one(int32_t rank, std::string why,
                                  std::vector<collective_entry> ledger) {
  auto s = canned_rank(rank, 64);
  s.on_step = [rank, why](const step_plan& plan) {
    if (plan.seq != 1) return step_outcome::reply(mock_done(plan, rank));
    return step_outcome::reject(to_caf_error(make_error(errc::collective_failed, why)));
  };
  s.on_collectives = [ledger] { return ledger; };
  return s;
}

collective_entry all_reduce_8(uint64_t seq, collective_status status) {
  return {seq, "all_reduce(sum)", "float32", 8, 32, status};
}

// Step 1 of the races below: rank 1 times out in all_reduce #2, which rank 0 never entered, and
// rank 0 sees only the abort.
const std::string rank_0_saw_the_abort = "step 1: rank 0: all_reduce on an aborted communicator";
const std::string rank_1_timed_out = "step 1: rank 1: all_reduce(sum) #2 of 8 float32 timed out "
                                     "after 1 s: rank(s) 0 did not enter it";
const std::string quotes_rank_1 = "(the failing rank: " + rank_1_timed_out + ")";

const request_result* result_of(const run_summary& s, uint64_t id) {
  for (const auto& r : s.results)
    if (r.request_id == id) return &r;
  return nullptr;
}

class DriverProtocol : public deterministic_fixture {
protected:
  recorder_handle rec = track(spawn_recorder(sys));

  driver_actor spawn_driver(const std::vector<mock_rank_handle>& ranks,
                            const std::function<void(driver_setup&)>& adjust = {}) {
    driver_setup setup;
    for (size_t r = 0; r < ranks.size(); ++r) {
      setup.ranks.push_back(ranks[r].actor);
      auto c = tiny_rank_config();
      c.rank = static_cast<int32_t>(r);
      c.tensor_parallel_size = static_cast<int32_t>(ranks.size());
      setup.configs.push_back(c);
    }
    setup.epoch = 1;
    if (adjust) adjust(setup);
    auto drv = spawn(driver, std::move(setup));
    run_all();
    return drv;
  }

  // start (everything runs but the recorder) -> the readies.
  std::optional<std::vector<rank_ready>> start(const driver_actor& drv) {
    inject(rec.actor, drv, atom::start_v);
    run_all_but(rec.actor);
    return expect_reply<std::vector<rank_ready>>(drv, rec.actor);
  }

  std::optional<int64_t> submit(const driver_actor& drv, std::vector<request_spec> specs) {
    inject(rec.actor, drv, atom::submit_v, std::move(specs));
    run_all_but(rec.actor);
    return expect_reply<int64_t>(drv, rec.actor);
  }
};

TEST_F(DriverProtocol, StartAllocatesTheMinimumPlannedBlockCountOnEveryRank) {
  auto r0 = track(spawn_mock_rank(sys, canned_rank(0, 40)));
  auto r1 = track(spawn_mock_rank(sys, canned_rank(1, 30)));
  auto drv = spawn_driver({r0, r1});
  inject(rec.actor, drv, atom::start_v);
  run_once(drv); // driver -> configure -> every rank
  auto c0 = expect<atom::configure, rank_config>(drv, r0.actor);
  auto c1 = expect<atom::configure, rank_config>(drv, r1.actor);
  ASSERT_TRUE(c0 && c1);
  EXPECT_EQ(std::get<1>(*c0).rank, 0);
  EXPECT_EQ(std::get<1>(*c1).rank, 1);
  ASSERT_TRUE(expect<rank_plan>(r0.actor, drv)); // 40 blocks: the driver waits for rank 1
  EXPECT_TRUE(expect_no_message(r0.actor));
  ASSERT_TRUE(expect<rank_plan>(r1.actor, drv)); // 30 blocks: allocate the minimum on both
  auto a0 = expect<atom::allocate, int64_t>(drv, r0.actor);
  auto a1 = expect<atom::allocate, int64_t>(drv, r1.actor);
  ASSERT_TRUE(a0 && a1);
  EXPECT_EQ(std::get<1>(*a0), 30);
  EXPECT_EQ(std::get<1>(*a1), 30);
  ASSERT_TRUE(expect<rank_ready>(r0.actor, drv));
  EXPECT_TRUE(expect_no_message(rec.actor)) << "start replies once every rank is ready";
  ASSERT_TRUE(expect<rank_ready>(r1.actor, drv));
  auto readies = expect_reply<std::vector<rank_ready>>(drv, rec.actor);
  ASSERT_TRUE(readies);
  ASSERT_EQ(readies->size(), 2u);
  EXPECT_EQ((*readies)[0].rank, 0);
  EXPECT_EQ((*readies)[1].rank, 1);
  EXPECT_EQ((*readies)[0].num_blocks, 30);
  EXPECT_EQ(r0.log->allocates, (std::vector<int64_t>{30}));
  EXPECT_EQ(r1.log->allocates, (std::vector<int64_t>{30}));
}

TEST_F(DriverProtocol, RejectsRunBeforeStart) {
  auto r0 = track(spawn_mock_rank(sys, mock_rank_script{})); // must not hear anything
  auto drv = spawn_driver({r0});
  inject(rec.actor, drv, atom::run_v);
  run_all_but(rec.actor);
  auto err = expect_error(drv, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "run:"));
}

TEST_F(DriverProtocol, RunsEveryRequestToItsOutputLengthWithReplicatedRanks) {
  auto r0 = track(spawn_mock_rank(sys, canned_rank(0, 64)));
  auto r1 = track(spawn_mock_rank(sys, canned_rank(1, 64)));
  auto drv = spawn_driver({r0, r1});
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(4)), 4);
  inject(rec.actor, drv, atom::run_v);
  run_all_but(rec.actor);
  auto s = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->finished, 4);
  EXPECT_EQ(s->failed, 0);
  EXPECT_EQ(s->generated_tokens, 12);
  ASSERT_EQ(s->results.size(), 4u);
  for (const auto& r : s->results)
    EXPECT_EQ(r.output.size(), 3u) << "request " << r.request_id;
  // Both ranks saw the same plans, in order, seq 0, 1, 2 ...
  ASSERT_EQ(r0.log->steps.size(), r1.log->steps.size());
  for (size_t i = 0; i < r0.log->steps.size(); ++i) {
    EXPECT_EQ(r0.log->steps[i], r1.log->steps[i]);
    EXPECT_EQ(r0.log->steps[i].seq, i);
  }
}

TEST_F(DriverProtocol, FailsTheRequestARankRejectsAndResendsTheStepWithoutIt) {
  auto script = canned_rank(0, 64);
  auto rejected = std::make_shared<bool>(false);
  script.on_step = [rejected](const step_plan& plan) {
    if (!*rejected && schedules(plan, 3)) {
      *rejected = true;
      return step_outcome::reject(to_caf_error(
          make_error(errc::invalid_argument, "scheduled: request 3 is poisoned"), {3}));
    }
    return step_outcome::reply(mock_done(plan, 0));
  };
  auto r0 = track(spawn_mock_rank(sys, script));
  auto drv = spawn_driver({r0});
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(5)), 5);
  inject(rec.actor, drv, atom::run_v);
  run_all_but(rec.actor);
  auto s = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->finished, 4);
  EXPECT_EQ(s->failed, 1);
  const auto* r3 = result_of(*s, 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_FALSE(r3->finished);
  EXPECT_THAT(r3->failure, HasSubstr("request 3 is poisoned"));
  for (uint64_t id : {1, 2, 4, 5}) {
    const auto* r = result_of(*s, id);
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(r->finished) << "request " << id << ": " << r->failure;
    EXPECT_EQ(r->output.size(), 3u) << "request " << id;
  }
  // The rejected plan was re-sent under the same seq, without request 3 (told to drop it).
  const auto& steps = r0.log->steps;
  auto bad =
      std::find_if(steps.begin(), steps.end(), [](const step_plan& p) { return schedules(p, 3); });
  ASSERT_NE(bad, steps.end());
  ASSERT_NE(std::next(bad), steps.end());
  const auto& again = *std::next(bad);
  EXPECT_EQ(again.seq, bad->seq);
  EXPECT_FALSE(schedules(again, 3));
  EXPECT_EQ(again.scheduled.size(), bad->scheduled.size() - 1);
  EXPECT_THAT(again.finished_requests, ::testing::Contains(3u));
  EXPECT_EQ(
      std::count_if(steps.begin(), steps.end(), [](const step_plan& p) { return schedules(p, 3); }),
      1)
      << "request 3 is never scheduled again";
}

TEST_F(DriverProtocol, AReplyTheSchedulerCannotApplyFailsTheStepsRequestsNamingTheReason) {
  // Both ranks answer step 1 without request 1's token, although the step decoded requests 1 to
  // 3: the tokens cannot be applied, so every request of the step fails with the reason (none is
  // lost, the run ends with its summary).
  auto drop_request_1 = [](int32_t rank) {
    auto script = canned_rank(rank, 64);
    script.on_step = [rank](const step_plan& plan) {
      auto done = mock_done(plan, rank);
      if (plan.seq == 1)
        std::erase_if(done.sampled, [](const sampled_token& t) { return t.request_id == 1; });
      return step_outcome::reply(done);
    };
    return script;
  };
  auto r0 = track(spawn_mock_rank(sys, drop_request_1(0)));
  auto r1 = track(spawn_mock_rank(sys, drop_request_1(1)));
  auto drv = spawn_driver({r0, r1});
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(3)), 3);
  inject(rec.actor, drv, atom::run_v);
  run_all_but(rec.actor);
  auto s = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->failed, 3) << "none lost";
  for (uint64_t id : {1, 2, 3}) {
    const auto* r = result_of(*s, id);
    ASSERT_NE(r, nullptr);
    EXPECT_FALSE(r->finished) << "request " << id;
    EXPECT_THAT(r->failure, HasSubstr("step 1: the ranks' reply cannot be applied: apply: "
                                      "step_done.sampled lacks request_id = 1"));
  }
}

TEST_F(DriverProtocol, ARankThatDiesMidRunEndsTheRunWithEveryUnfinishedRequestFailedNamingIt) {
  auto r0 = track(spawn_mock_rank(sys, canned_rank(0, 64)));
  auto script = canned_rank(1, 64);
  script.on_step = [](const step_plan& plan) {
    if (plan.seq == 1) return step_outcome::die(caf::exit_reason::kill);
    return step_outcome::reply(mock_done(plan, 1));
  };
  auto r1 = track(spawn_mock_rank(sys, script));
  auto drv = spawn_driver({r0, r1});
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(2)), 2);
  inject(rec.actor, drv, atom::run_v);
  run_all_but(rec.actor); // never hangs: the deterministic run ends when nothing is left to do
  auto summary = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->error.code, errc::rank_lost);
  EXPECT_THAT(summary->error.message, HasSubstr("rank 1 stopped"));
  EXPECT_EQ(summary->finished + summary->failed, 2) << "none lost";
  EXPECT_EQ(summary->failed, 2);
  for (const auto& r : summary->results) {
    EXPECT_FALSE(r.finished) << "request " << r.request_id;
    EXPECT_THAT(r.failure, HasSubstr("not run: rank 1 stopped")) << "request " << r.request_id;
  }
  EXPECT_EQ(r1.log->steps.size(), 2u);
  EXPECT_TRUE(expect_no_message(rec.actor)) << "one reply to run";
}

TEST_F(DriverProtocol, AFailedCollectiveEndsTheRunWithTheDiagnosisFromEveryRanksLedger) {
  // Step 1: rank 0 times out in all_reduce #2, which rank 1 never entered (it stopped after #1).
  const auto s0 = failing_step_one(0,
                                   "step 1: rank 0: all_reduce(sum) #2 of 8 float32 timed out "
                                   "after 1 s: rank(s) 1 did not enter it",
                                   {all_reduce_8(1, collective_status::completed),
                                    all_reduce_8(2, collective_status::timed_out)});
  const auto s1 = failing_step_one(1, "step 1: rank 1: aborted",
                                   {all_reduce_8(1, collective_status::completed)});
  auto r0 = track(spawn_mock_rank(sys, s0));
  auto r1 = track(spawn_mock_rank(sys, s1));
  auto drv = spawn_driver({r0, r1});
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(3)), 3);
  inject(rec.actor, drv, atom::run_v);
  run_all_but(rec.actor);
  auto s = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(s) << "the run ends with its summary: every request is reported";
  const std::string diagnosis = "rank 1 is at all_reduce(sum) #1 (8 float32, completed) and has "
                                "not entered #2; rank 0 waits in all_reduce(sum) #2 (8 float32)";
  EXPECT_THAT(s->error.message, HasSubstr("step 1: a collective failed: " + diagnosis))
      << s->error.message;
  EXPECT_EQ(s->error.code, errc::collective_failed);
  EXPECT_THAT(s->error.message, HasSubstr("(the failing rank: step 1: rank 0: all_reduce(sum) #2"))
      << "the timed-out rank's own error is quoted";
  EXPECT_EQ(s->failed, 3);
  for (const auto& r : s->results)
    EXPECT_THAT(r.failure, HasSubstr(diagnosis)) << "request " << r.request_id;
  EXPECT_EQ(r0.log->collectives, 1);
  EXPECT_EQ(r1.log->collectives, 1);
  EXPECT_EQ(r0.log->steps.size(), 2u) << "no step after the failed collective";
}

TEST_F(DriverProtocol, TheTimedOutRanksErrorIsQuotedEvenWhenAPeersAbortArrivesFirst) {
  // Step 1: rank 1 times out in all_reduce #2, which rank 0 never entered; rank 0 answers first,
  // with the abort it saw. The diagnosis starts at that first error, and the driver reads the
  // ranks' errors once their ledgers are in, so the timed-out rank's own error is the one quoted.
  const auto s0 =
      failing_step_one(0, rank_0_saw_the_abort, {all_reduce_8(1, collective_status::completed)});
  auto s1 = failing_step_one(1, rank_1_timed_out,
                             {all_reduce_8(1, collective_status::completed),
                              all_reduce_8(2, collective_status::timed_out)});
  auto r0 = track(spawn_mock_rank(sys, s0));
  int64_t ledgers_asked_before_rank_1_failed = -1; // rank 0's, when rank 1 answers step 1
  s1.on_step = [answer = s1.on_step, r0_log = r0.log,
                &ledgers_asked_before_rank_1_failed](const step_plan& plan) {
    if (plan.seq == 1) ledgers_asked_before_rank_1_failed = r0_log->collectives;
    return answer(plan);
  };
  auto r1 = track(spawn_mock_rank(sys, s1));
  auto drv = spawn_driver({r0, r1});
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(3)), 3);
  inject(rec.actor, drv, atom::run_v);
  // Rank 1 holds its answer to step 1 until the driver has started the diagnosis (asked rank 0
  // for its ledger); everything else runs, the recorder's mailbox aside.
  auto* skip = dynamic_cast<caf::resumable*>(caf::actor_cast<caf::abstract_actor*>(rec.actor));
  auto* late = dynamic_cast<caf::resumable*>(caf::actor_cast<caf::abstract_actor*>(r1.actor));
  sched.run_jobs_filtered([&](caf::resumable* job) {
    return job != skip && (job != late || r1.log->steps.empty() || r0.log->collectives > 0);
  });
  auto s = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(s) << "the run ends with its summary: every request is reported";
  ASSERT_EQ(ledgers_asked_before_rank_1_failed, 1)
      << "rank 1 answered step 1 only once the diagnosis had begun";
  EXPECT_THAT(s->error.message, HasSubstr(quotes_rank_1)) << s->error.message;
  EXPECT_EQ(s->failed, 3);
}

// A step channel that only keeps what the driver sends: the test answers for the nodes.
class kept_steps : public node_step_channel {
public:
  bool open(size_t) const override { return true; }
  status send(size_t route, uint64_t seq, const node_step& step) override {
    sent.push_back({route, seq, step});
    return ok();
  }
  struct sent_step {
    size_t route;
    uint64_t seq;
    node_step step;
  };
  std::vector<sent_step> sent;
};

// Node `route`'s answer on its channel to the step in `s`, its ranks' entries still to add.
node_channel_event answer_on_channel(const kept_steps::sent_step& s) {
  node_channel_event e;
  e.route = static_cast<int32_t>(s.route);
  e.seq = s.seq;
  e.answer.seq = s.seq;
  return e;
}

// That answer: rank `rank` executed the step.
node_channel_event done_on_channel(const kept_steps::sent_step& s, int32_t rank) {
  auto e = answer_on_channel(s);
  e.answer.done.push_back(mock_done(*decode<step_plan>(s.step.plan), rank));
  return e;
}

// That answer: rank `rank` failed the step with collective error `why`.
node_channel_event failed_on_channel(const kept_steps::sent_step& s, int32_t rank,
                                     const std::string& why) {
  auto e = answer_on_channel(s);
  e.answer.rejected.push_back({s.seq, rank, make_error(errc::collective_failed, why), {}});
  return e;
}

TEST_F(DriverProtocol, OnTheStepChannelAnErrorArrivingDuringTheDiagnosisIsStillQuoted) {
  // Cluster mode, one rank on each of two nodes, steps on the nodes' channels. Step 1: node 0
  // reports rank 0's abort; node 1 reports rank 1's timeout only once the driver has asked the
  // ranks for their ledgers. That answer joins the errors the diagnosis quotes from.
  auto r0 = track(
      spawn_mock_rank(sys, failing_step_one(0, rank_0_saw_the_abort,
                                            {all_reduce_8(1, collective_status::completed)})));
  auto r1 = track(
      spawn_mock_rank(sys, failing_step_one(1, rank_1_timed_out,
                                            {all_reduce_8(1, collective_status::completed),
                                             all_reduce_8(2, collective_status::timed_out)})));
  auto channel = std::make_shared<kept_steps>();
  auto drv = spawn_driver({r0, r1}, [&](driver_setup& setup) {
    setup.routes = {node_route{{}, {0}, {0}}, node_route{{}, {1}, {0}}};
    setup.channel = channel;
  });
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(3)), 3);
  inject(rec.actor, drv, atom::run_v);
  run_all_but(rec.actor);
  ASSERT_EQ(channel->sent.size(), 2u) << "step 0 went to both nodes on their channels";
  inject(rec.actor, drv, done_on_channel(channel->sent[0], 0));
  inject(rec.actor, drv, done_on_channel(channel->sent[1], 1));
  run_all_but(rec.actor);
  ASSERT_EQ(channel->sent.size(), 4u) << "then step 1";
  inject(rec.actor, drv, failed_on_channel(channel->sent[2], 0, rank_0_saw_the_abort));
  run_once(drv); // the diagnosis starts: a ledger request to each rank
  inject(rec.actor, drv, failed_on_channel(channel->sent[3], 1, rank_1_timed_out));
  run_all_but(rec.actor);
  auto s = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(s) << "the run ends with its summary: every request is reported";
  EXPECT_EQ(r0.log->collectives, 1);
  EXPECT_THAT(s->error.message, HasSubstr(quotes_rank_1)) << s->error.message;
  EXPECT_EQ(s->failed, 3);
}

// A rank that dies while `start` waits for its configure reply fails the start at once: the
// driver's down handler delivers the pending start promise an io_error naming the rank and its
// exit reason, so `kvactor run` reports the lost rank instead of hanging at start-up.
TEST_F(DriverProtocol, ARankThatDiesDuringStartFailsTheStartWithAnError) {
  auto r0 = track(spawn_mock_rank(sys, canned_rank(0, 64)));
  auto script = canned_rank(1, 64);
  script.die_on_configure = caf::exit_reason::kill;
  auto r1 = track(spawn_mock_rank(sys, script));
  auto drv = spawn_driver({r0, r1});
  inject(rec.actor, drv, atom::start_v);
  run_all_but(rec.actor);
  auto err = expect_error(drv, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::rank_lost, "rank 1 stopped: exit_reason(kill)"))
      << message_of(*err);
}

TEST_F(DriverProtocol, ARequestSubmittedDuringARunIsServedInThatRun) {
  auto r0 = track(spawn_mock_rank(sys, canned_rank(0, 64)));
  auto drv = spawn_driver({r0});
  ASSERT_TRUE(start(drv));
  EXPECT_EQ(submit(drv, requests(2)), 2);
  inject(rec.actor, drv, atom::run_v);
  run_once(drv); // the run starts: step 0 goes to the rank
  auto step0 = peek_from<step_plan>(drv, r0.actor);
  ASSERT_TRUE(step0);
  EXPECT_EQ(std::get<0>(*step0).seq, 0u);
  // A duplicate id is refused; a new one is admitted (kvactor inject does exactly this).
  inject(rec.actor, drv, atom::submit_v, requests(1));
  run_once(drv);
  auto err = expect_error(drv, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(
      is_kvactor_error(*err, errc::invalid_argument, "submit: request_id 1 is submitted twice"));
  inject(rec.actor, drv, atom::submit_v,
         std::vector<request_spec>{{9, std::vector<int32_t>(8, 9), 3, 0}});
  run_once(drv);
  auto count = expect_reply<int64_t>(drv, rec.actor);
  ASSERT_TRUE(count);
  EXPECT_EQ(*count, 3);
  run_all_but(rec.actor);
  auto s = expect_reply<run_summary>(drv, rec.actor);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->finished, 3) << "the request submitted during the run is served in it";
  EXPECT_EQ(s->results.size(), 3u);
}

} // namespace
} // namespace kvactor::test
