#include "actors/driver/scheduler.hpp"

#include <numeric>

#include <gtest/gtest.h>

#include "tests/driver/driver_test_support.hpp"
#include "tests/driver/scheduler_test_support.hpp"

namespace kvactor {
namespace {

using test::fake_done;
using test::fake_token;
using test::full_group;
using test::ids_of;
using test::num_scheduled_tokens;
using test::run_step;
using test::sliding_group;
using ids = std::vector<uint64_t>;
using tokens = std::vector<int32_t>;

scheduler_config config(int32_t max_num_seqs, int32_t budget, int64_t max_model_len = 1000) {
  return {{max_num_seqs, budget, max_model_len}, 1};
}

tokens prompt_of(int32_t n, int32_t first = 1) {
  tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Scheduler, AddRequestRejectsAnEmptyPromptAndRecordsItAsFailed) {
  scheduler s(config(4, 64), {full_group(4)}, 100);
  auto st = s.add_request(1, {}, 5);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.err().code, errc::invalid_argument);
  ASSERT_NE(s.find(1), nullptr);
  EXPECT_EQ(s.find(1)->st, request_state::status::failed);
  EXPECT_TRUE(contains(s.find(1)->failure, "empty"));
  EXPECT_EQ(s.num_failed(), 1);
  EXPECT_FALSE(s.has_work());
}

TEST(Scheduler, AddRequestRejectsAPromptAsLongAsMaxModelLen) {
  scheduler s(config(4, 64, 8), {full_group(4)}, 100);
  auto st = s.add_request(1, prompt_of(8), 5);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st.err().message, "max_model_len = 8"));
  EXPECT_EQ(s.find(1)->st, request_state::status::failed);
  EXPECT_TRUE(s.add_request(2, prompt_of(7), 5));
  EXPECT_EQ(s.request_order(), (ids{1, 2}));
}

TEST(Scheduler, APromptTokenOutsideTheVocabularyFailsThatRequestAloneAtAdmission) {
  auto cfg = config(4, 64);
  cfg.vocab_size = 256;
  scheduler s(cfg, {full_group(4)}, 100);
  auto st = s.add_request(1, {5, 300, 7}, 5);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st.err().message, "prompt[1] = 300 is outside the model's vocabulary "
                                         "[0, 256)"))
      << st.err().message;
  EXPECT_EQ(s.find(1)->st, request_state::status::failed);
  EXPECT_FALSE(s.add_request(2, {-1}, 5));
  EXPECT_TRUE(s.add_request(3, {0, 255}, 5)) << "the ends of the vocabulary are tokens";
  EXPECT_TRUE(s.has_work()) << "the good request is served";
}

TEST(Scheduler, StopTokensEndARequestWithReasonStopAndKeepTheToken) {
  scheduler s(config(4, 64), {full_group(4)}, 100);
  sampling_params stop;
  stop.stop_token_ids = {42};
  ASSERT_TRUE(s.add_request(1, prompt_of(4), 10, stop));
  ASSERT_TRUE(s.add_request(2, prompt_of(4), 2));
  auto plan = s.schedule(0, 1);
  ASSERT_TRUE(plan);
  step_done done;
  done.seq = 0;
  done.epoch = 1;
  done.sampled = {{1, 42}, {2, 42}};
  auto first = s.apply(done);
  ASSERT_TRUE(first) << first.err().message;
  EXPECT_EQ(s.find(1)->st, request_state::status::finished);
  EXPECT_EQ(s.find(1)->reason, finish_reason::stop);
  EXPECT_EQ(s.find(1)->output, (std::vector<int32_t>{42}));
  EXPECT_EQ(s.find(2)->st, request_state::status::running) << "42 stops only request 1";
  plan = s.schedule(1, 1);
  ASSERT_TRUE(plan);
  done.seq = 1;
  done.sampled = {{2, 7}};
  auto applied = s.apply(done);
  ASSERT_TRUE(applied) << applied.err().message;
  EXPECT_EQ(s.find(2)->reason, finish_reason::length);
}

TEST(Scheduler, LogprobsAreKeptPerOutputTokenOnlyForRequestsThatAskForThem) {
  scheduler s(config(4, 64), {full_group(4)}, 100);
  sampling_params asks;
  asks.logprobs = 1;
  ASSERT_TRUE(s.add_request(1, prompt_of(4), 2, asks));
  ASSERT_TRUE(s.add_request(2, prompt_of(4), 2));
  ASSERT_TRUE(s.schedule(0, 1));
  step_done done;
  done.seq = 0;
  done.epoch = 1;
  const token_logprobs lp{-0.5f, {{9, -0.5f}}};
  done.sampled = {{1, 9, lp}, {2, 9, lp}};
  ASSERT_TRUE(s.apply(done));
  EXPECT_EQ(s.find(1)->logprobs, (std::vector<token_logprobs>{lp}));
  EXPECT_TRUE(s.find(2)->logprobs.empty()) << "request 2 asked for none";
}

TEST(Scheduler, MoreLogprobsThanTheMaximumAreRefusedNamingTheField) {
  scheduler s(config(4, 64), {full_group(4)}, 100);
  sampling_params too_many;
  too_many.logprobs = max_logprobs + 1;
  auto st = s.add_request(1, prompt_of(4), 2, too_many);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st.err().message, "sampling.logprobs = 21 is outside [-1, 20]"))
      << st.err().message;
  too_many.logprobs = -2;
  EXPECT_FALSE(s.add_request(2, prompt_of(4), 2, too_many));
  too_many.logprobs = max_logprobs;
  EXPECT_TRUE(s.add_request(3, prompt_of(4), 2, too_many));
}

TEST(Scheduler, AddRequestRejectsADuplicateIdAndKeepsTheFirst) {
  scheduler s(config(4, 64), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, {5, 6}, 3));
  auto st = s.add_request(1, {7}, 3);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st.err().message, "already exists"));
  EXPECT_EQ(s.find(1)->prompt, (tokens{5, 6}));
  EXPECT_EQ(s.find(1)->st, request_state::status::waiting);
  EXPECT_EQ(s.request_order().size(), 1u);
}

TEST(Scheduler, AddRequestRejectsARequestThatCouldNeverFitInThePool) {
  scheduler s(config(4, 64), {full_group(4)}, 5); // 4 usable blocks = 16 tokens
  // 10 + 10 tokens: the cache would hold 19 (the last token is never fed) = 5 blocks.
  auto st = s.add_request(1, prompt_of(10), 10);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.err().code, errc::insufficient_memory);
  EXPECT_EQ(s.find(1)->st, request_state::status::failed);
  EXPECT_TRUE(s.add_request(2, prompt_of(10), 7)); // 16 tokens fed: exactly 4 blocks
}

TEST(Scheduler, RespectsTheTokenBudget) {
  scheduler s(config(8, 10), {full_group(4)}, 100);
  for (uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(s.add_request(id, prompt_of(6), 4));
  auto plan = s.schedule(1, 0);
  ASSERT_TRUE(plan);
  EXPECT_EQ(num_scheduled_tokens(*plan), 10);
  EXPECT_EQ(ids_of(*plan), (ids{1, 2})); // 6 + a 4-token chunk; 3 waits
  EXPECT_EQ(plan->new_requests.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1);
}

TEST(Scheduler, RespectsMaxNumSeqs) {
  scheduler s(config(2, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(3), 1));
  ASSERT_TRUE(s.add_request(2, prompt_of(3), 5));
  ASSERT_TRUE(s.add_request(3, prompt_of(3), 5));
  auto first = run_step(s, 1);
  EXPECT_EQ(ids_of(first), (ids{1, 2})); // request 1 finishes after its one token
  auto second = run_step(s, 2);
  EXPECT_EQ(ids_of(second), (ids{2, 3}));
  EXPECT_EQ(s.num_running(), 2) << "requests 2 and 3, at the max_num_seqs of 2";
}

TEST(Scheduler, ChunkedPrefillSplitsALongPromptAcrossSteps) {
  scheduler s(config(4, 4), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(7, prompt_of(10, 100), 2));
  std::vector<scheduled_request> seen;
  for (uint64_t seq = 1; seq <= 4; ++seq) {
    auto plan = run_step(s, seq);
    ASSERT_EQ(plan.scheduled.size(), 1u);
    seen.push_back(plan.scheduled[0]);
  }
  EXPECT_EQ(seen[0], (scheduled_request{7, 0, {100, 101, 102, 103}, false}));
  EXPECT_EQ(seen[1], (scheduled_request{7, 4, {104, 105, 106, 107}, false}));
  EXPECT_EQ(seen[2], (scheduled_request{7, 8, {108, 109}, true}));
  EXPECT_EQ(seen[3], (scheduled_request{7, 10, {fake_token(7, 10)}, true}));
  EXPECT_EQ(s.find(7)->output, (tokens{fake_token(7, 10), fake_token(7, 11)}));
  EXPECT_EQ(s.find(7)->st, request_state::status::finished);
}

TEST(Scheduler, OrdersDecodesBeforePrefillChunks) {
  scheduler s(config(8, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(4), 5));
  run_step(s, 1);
  ASSERT_TRUE(s.add_request(2, prompt_of(6), 5));
  ASSERT_TRUE(s.add_request(3, prompt_of(1), 5)); // a one-token prompt batches like a decode
  auto plan = run_step(s, 2);
  EXPECT_EQ(ids_of(plan), (ids{1, 3, 2}));
  auto next = run_step(s, 3);
  EXPECT_EQ(ids_of(next), (ids{1, 2, 3}));
}

TEST(Scheduler, FinishedRequestFreesBlocksAndAppearsInTheNextPlan) {
  scheduler s(config(4, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(4), 2));
  run_step(s, 1);
  EXPECT_EQ(s.pool().num_used(), 1);
  auto decode = run_step(s, 2); // the 5th token needs a second block
  EXPECT_EQ(decode.block_updates, (std::vector<block_table_update>{{1, 0, 1, {2}}}));
  EXPECT_EQ(s.find(1)->st, request_state::status::finished);
  EXPECT_EQ(s.num_finished(), 1);
  EXPECT_EQ(s.pool().num_used(), 0);
  EXPECT_EQ(s.pool().peak_used(), 2);
  EXPECT_FALSE(s.has_work());
  EXPECT_TRUE(s.has_pending_finished());
  auto flush = s.schedule(3, 0);
  ASSERT_TRUE(flush);
  EXPECT_TRUE(flush->scheduled.empty());
  EXPECT_EQ(flush->finished_requests, (ids{1}));
}

TEST(Scheduler, FinishesWhenPromptPlusOutputReachesMaxModelLen) {
  scheduler s(config(4, 100, 6), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(4), 100));
  for (uint64_t seq = 1; s.has_work() && seq < 10; ++seq)
    run_step(s, seq);
  EXPECT_EQ(s.find(1)->output.size(), 2u);
  EXPECT_EQ(s.find(1)->st, request_state::status::finished);
}

TEST(Scheduler, PreemptsTheLastRunningRequestByRecomputeAndKeepsItsOutput) {
  scheduler s(config(4, 100), {full_group(4)}, 5); // 4 usable blocks of 4 tokens
  ASSERT_TRUE(s.add_request(1, prompt_of(4), 8));
  ASSERT_TRUE(s.add_request(2, prompt_of(4, 50), 8));
  uint64_t seq = 1;
  for (; seq <= 5; ++seq)
    EXPECT_EQ(ids_of(run_step(s, seq)), (ids{1, 2})); // 9 tokens each: 4 blocks in use
  EXPECT_EQ(s.pool().num_free(), 0);
  // Request 1 needs a third block: the last running request (2) gives its blocks back.
  auto plan = run_step(s, seq++);
  EXPECT_EQ(ids_of(plan), (ids{1}));
  EXPECT_EQ(plan.finished_requests, (ids{2})); // ranks drop its state
  EXPECT_EQ(s.num_preemptions(), 1);
  const auto* two = s.find(2);
  EXPECT_EQ(two->st, request_state::status::waiting);
  EXPECT_EQ(two->num_computed_tokens, 0);
  EXPECT_EQ(two->num_preemptions, 1);
  EXPECT_EQ(two->output.size(), 5u);
  auto kept = two->output;
  // Request 2 comes back after 1 finishes, as a new request whose prompt is prompt + output.
  step_plan readmit;
  while (s.has_work() && readmit.new_requests.empty() && seq < 50)
    readmit = run_step(s, seq++);
  EXPECT_EQ(s.find(1)->st, request_state::status::finished);
  ASSERT_EQ(readmit.new_requests.size(), 1u);
  EXPECT_EQ(readmit.new_requests[0], (new_request{2, 9, 3}));
  ASSERT_EQ(readmit.scheduled.size(), 1u);
  tokens refeed = prompt_of(4, 50);
  refeed.insert(refeed.end(), kept.begin(), kept.end());
  EXPECT_EQ(readmit.scheduled[0], (scheduled_request{2, 0, refeed, true}));
  while (s.has_work() && seq < 50)
    run_step(s, seq++);
  const auto& out = s.find(2)->output;
  ASSERT_EQ(out.size(), 8u);
  EXPECT_TRUE(std::equal(kept.begin(), kept.end(), out.begin()));
  for (int32_t k = 0; k < 8; ++k)
    EXPECT_EQ(out[k], fake_token(2, 4 + k));
  EXPECT_EQ(s.pool().num_used(), 0);
}

TEST(Scheduler, SlidingWindowReleasesShowUpAsNullBlockWrites) {
  scheduler s(config(4, 100), {full_group(4), sliding_group(4, 4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(8), 4));
  run_step(s, 1);
  auto decode = run_step(s, 2); // 8 computed, window 4: tokens < 5 are dead, so block 0 goes
  EXPECT_EQ(decode.block_updates,
            (std::vector<block_table_update>{{1, 1, 0, {0}}, {1, 0, 2, {5}}, {1, 1, 2, {6}}}));
  EXPECT_EQ(s.blocks().num_blocks_of(1), 3 + 2);
}

TEST(Scheduler, ApplyRejectsUnknownRequestIdsAndChangesNothing) {
  scheduler s(config(4, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(3), 4));
  auto plan = s.schedule(1, 0);
  ASSERT_TRUE(plan);
  auto done = fake_done(*plan);
  done.sampled.push_back({999, 5});
  auto st = s.apply(done);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st.err().message, "sampled.request_id = 999"));
  EXPECT_TRUE(s.find(1)->output.empty());
  EXPECT_TRUE(s.apply(fake_done(*plan)));
  EXPECT_EQ(s.find(1)->output.size(), 1u);
}

TEST(Scheduler, ApplyRejectsAStepDoneOfAnotherSeqOrEpochOrTwice) {
  scheduler s(config(4, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(3), 4));
  auto plan = s.schedule(5, 2);
  ASSERT_TRUE(plan);
  auto done = fake_done(*plan);
  done.seq = 4;
  EXPECT_TRUE(contains(s.apply(done).err().message, "step_done.seq = 4"));
  done = fake_done(*plan);
  done.epoch = 1;
  EXPECT_TRUE(contains(s.apply(done).err().message, "step_done.epoch = 1"));
  done = fake_done(*plan);
  done.sampled.clear();
  EXPECT_TRUE(contains(s.apply(done).err().message, "lacks request_id = 1"));
  ASSERT_TRUE(s.apply(fake_done(*plan)));
  EXPECT_TRUE(contains(s.apply(fake_done(*plan)).err().message, "already applied"));
}

TEST(Scheduler, ScheduleRefusesWhileThePreviousPlanIsUnapplied) {
  scheduler s(config(4, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(3), 4));
  ASSERT_TRUE(s.schedule(1, 0));
  auto again = s.schedule(2, 0);
  ASSERT_FALSE(again);
  EXPECT_TRUE(contains(again.err().message, "seq = 1 has not been applied"));
}

TEST(Scheduler, APlanWhoseRequestsAllFailedIsAbandonedNotAwaited) {
  scheduler s(config(4, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(3), 4));
  ASSERT_TRUE(s.add_request(2, prompt_of(3), 4));
  ASSERT_TRUE(s.schedule(1, 0));
  s.fail_request(1, "rank 0 rejected the step");
  EXPECT_FALSE(s.schedule(2, 0)); // request 2 still waits for its token
  s.fail_request(2, "rank 0 rejected the step");
  auto next = s.schedule(2, 0);
  ASSERT_TRUE(next) << next.err().message;
  EXPECT_EQ(next->finished_requests, (ids{1, 2}));
  EXPECT_EQ(s.pool().num_used(), 0);
}

TEST(Scheduler, FailRequestFreesBlocksAndTellsTheRanks) {
  scheduler s(config(4, 100), {full_group(4)}, 100);
  ASSERT_TRUE(s.add_request(1, prompt_of(6), 4));
  ASSERT_TRUE(s.add_request(2, prompt_of(3), 4));
  auto plan = s.schedule(1, 0);
  ASSERT_TRUE(plan);
  s.fail_request(1, "rank 1 died");
  EXPECT_EQ(s.find(1)->st, request_state::status::failed);
  EXPECT_EQ(s.find(1)->failure, "rank 1 died");
  EXPECT_EQ(s.blocks().num_blocks_of(1), 0);
  auto done = fake_done(*plan); // its token is ignored: it failed after the plan was made
  ASSERT_TRUE(s.apply(done));
  EXPECT_TRUE(s.find(1)->output.empty());
  ASSERT_TRUE(s.add_request(3, prompt_of(3), 4));
  s.fail_request(3, "client went away"); // never reached the ranks: nothing to tell
  auto next = run_step(s, 2);
  EXPECT_EQ(next.finished_requests, (ids{1}));
  EXPECT_EQ(ids_of(next), (ids{2}));
  EXPECT_EQ(s.num_failed(), 2);
}

TEST(Scheduler, PlanIsEmptyOnlyWhenNothingCanRun) {
  scheduler s(config(4, 100), {full_group(4)}, 100);
  auto idle = s.schedule(1, 0);
  ASSERT_TRUE(idle);
  EXPECT_TRUE(idle->scheduled.empty());
  ASSERT_TRUE(s.add_request(1, prompt_of(3), 1));
  auto busy = run_step(s, 2);
  EXPECT_FALSE(busy.scheduled.empty());
  EXPECT_EQ(busy.num_ubatches, 1);
}

} // namespace
} // namespace kvactor
