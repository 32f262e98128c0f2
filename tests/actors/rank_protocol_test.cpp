// Rank protocol on kvactor-tiny: configure -> rank_plan, allocate(n) -> rank_ready, step_plan ->
// step_done. Every bad step is rejected with an error naming the field (and the request, for
// per-request faults) and leaves the rank exactly as it was: the next valid step samples the same
// token as on a twin rank that never saw the bad step.
#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/rank/actor.hpp"
#include "actors/spawn_plain.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/recorder.hpp"
#include "tests/support/tiny_model.hpp"
#include "tests/support/tiny_reference.hpp"

namespace kvactor::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ids = std::vector<uint64_t>;

constexpr uint64_t epoch = 1;

// Step 0: admit request 1 (prompt of 4 tokens) with one block per KV cache group (ids 1 and 2:
// the groups share one pool) and feed its whole prompt.
step_plan admit_request_1() {
  step_plan p;
  p.seq = 0;
  p.epoch = epoch;
  p.new_requests = {{1, 4, 8}};
  p.block_updates = {{1, 0, 0, {1}}, {1, 1, 0, {2}}};
  p.scheduled = {{1, 0, {5, 6, 7, 8}, true}};
  return p;
}

// A decode of request 1 after its prompt (4 tokens computed).
step_plan decode_request_1(uint64_t seq, int32_t token) {
  step_plan p;
  p.seq = seq;
  p.epoch = epoch;
  p.scheduled = {{1, 4, {token}, true}};
  return p;
}

class RankProtocol : public deterministic_fixture {
protected:
  rank_actor rk = spawn(plain<&rank>, nullptr);
  recorder_handle rec = track(spawn_recorder(sys));

  RankProtocol() { run_all(); }

  std::optional<rank_plan> configure(const rank_actor& r, const rank_config& cfg) {
    inject(rec.actor, r, atom::configure_v, cfg);
    run_all_but(rec.actor); // the rank, its kv_cache and its registry
    return expect_reply<rank_plan>(r, rec.actor);
  }

  std::optional<rank_ready> allocate(const rank_actor& r, int64_t num_blocks) {
    inject(rec.actor, r, atom::allocate_v, num_blocks);
    run_all_but(rec.actor); // the rank, kv_cache, builders and cudagraph
    return expect_reply<rank_ready>(r, rec.actor);
  }

  // configure + allocate with the planned block count.
  std::optional<rank_ready> make_ready(const rank_actor& r) {
    auto plan = configure(r, tiny_rank_config());
    if (!plan) return std::nullopt;
    return allocate(r, plan->kv.config.num_blocks);
  }

  std::optional<step_done> step(const rank_actor& r, const step_plan& plan) {
    inject(rec.actor, r, plan);
    run_all_but(rec.actor); // the rank, its builders and cudagraph
    return expect_reply<step_done>(r, rec.actor);
  }

  std::optional<caf::error> rejected_step(const rank_actor& r, const step_plan& plan) {
    inject(rec.actor, r, plan);
    run_all_but(rec.actor);
    return expect_error(r, rec.actor);
  }

  // The bad step is rejected naming `field` (and `request_ids`), and the rank is unchanged: the
  // valid steps `after` give what a twin rank gives that never saw the bad step.
  void expect_rejected_unchanged(const step_plan& bad, const std::string& field,
                                 const ids& request_ids, const std::vector<step_plan>& after) {
    auto twin = spawn(plain<&rank>, nullptr);
    run_all();
    auto ready = make_ready(rk);
    ASSERT_TRUE(ready);
    ASSERT_TRUE(make_ready(twin));
    ASSERT_TRUE(step(rk, admit_request_1()));
    ASSERT_TRUE(step(twin, admit_request_1()));

    auto err = rejected_step(rk, bad);
    ASSERT_TRUE(err);
    EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, field));
    EXPECT_EQ(request_ids_of(*err), request_ids);

    for (const auto& plan : after) {
      auto got = step(rk, plan);
      auto want = step(twin, plan);
      ASSERT_TRUE(got) << "a valid step after the rejected one (seq " << plan.seq << ")";
      ASSERT_TRUE(want);
      EXPECT_EQ(got->seq, plan.seq);
      EXPECT_EQ(got->sampled, want->sampled) << "the rejected step changed the rank";
    }
  }
};

TEST_F(RankProtocol, ConfigureLoadsTheModelPlansTheKvCacheThenAsksTheRegistry) {
  inject(rec.actor, rk, atom::configure_v, tiny_rank_config());
  run_once(rk); // load model, weights; spawn kv_cache, registry, cudagraph; ask kv_cache
  auto kv = scheduled_actor_named("kvactor.kv_cache");
  auto reg = scheduled_actor_named("kvactor.registry");
  auto request = expect<atom::plan, model_layout, kv_plan_request>(rk, kv);
  ASSERT_TRUE(request);
  EXPECT_EQ(std::get<1>(*request).model_type, "llama");
  EXPECT_EQ(std::get<2>(*request), tiny_plan_request());
  ASSERT_TRUE(expect<kv_local_plan>(kv, rk)); // the rank then asks the registry
  auto assign =
      expect<atom::assign, model_layout, std::vector<kv_cache_group>, device_kind, std::string>(
          rk, reg);
  ASSERT_TRUE(assign);
  EXPECT_EQ(std::get<2>(*assign).size(), 2u);
  EXPECT_EQ(std::get<3>(*assign), device_kind::cpu);
  EXPECT_EQ(std::get<4>(*assign), "auto");
  ASSERT_TRUE(expect<backend_assignment>(reg, rk));
  auto plan = expect_reply<rank_plan>(rk, rec.actor);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->rank, 0);
  EXPECT_EQ(plan->kv.config.num_blocks, tiny_expected_blocks()) << "8 MiB in 16 KiB blocks";
  EXPECT_EQ(plan->backends.kernel_block_sizes, (std::vector<int32_t>{16, 16}));
  std::vector<std::string> phases;
  for (const auto& p : plan->phases)
    phases.push_back(p.phase);
  EXPECT_THAT(phases, ElementsAre("load model", "weights", "kv_cache plan", "registry assign"));
}

TEST_F(RankProtocol, RejectsASecondConfigure) {
  ASSERT_TRUE(configure(rk, tiny_rank_config()));
  inject(rec.actor, rk, atom::configure_v, tiny_rank_config());
  run_all_but(rec.actor);
  auto err = expect_error(rk, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "configure:"));
}

TEST_F(RankProtocol, RejectsAllocateBeforeConfigure) {
  inject(rec.actor, rk, atom::allocate_v, int64_t{16});
  run_all_but(rec.actor);
  auto err = expect_error(rk, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "allocate:"));
  EXPECT_THAT(message_of(*err), HasSubstr("before configure"));
}

TEST_F(RankProtocol, AllocateBindsTheAgreedBlockCountAndPlansEagerGraphsOnCpu) {
  auto plan = configure(rk, tiny_rank_config());
  ASSERT_TRUE(plan);
  const int64_t planned = plan->kv.config.num_blocks;
  auto ready = allocate(rk, planned);
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->num_blocks, planned);
  EXPECT_EQ(ready->kv_cache_bytes, planned * tiny_block_bytes()) << "the whole 8 MiB budget";
  EXPECT_EQ(ready->graphs.mode, cudagraph_mode::none);
  std::vector<std::string> phases;
  for (const auto& p : ready->phases)
    phases.push_back(p.phase);
  EXPECT_THAT(phases, ::testing::IsSupersetOf({"kv_cache allocate", "cudagraph plan"}));
  inject(rec.actor, rk, atom::ledger_v);
  run_all_but(rec.actor);
  auto ledger = expect_reply<std::vector<memory_entry>>(rk, rec.actor);
  ASSERT_TRUE(ledger);
  EXPECT_THAT(*ledger, ::testing::Contains(memory_entry{"kv_cache", ready->kv_cache_bytes}));
}

TEST_F(RankProtocol, AllocateRefusesABlockCountOtherThanTheMinimumTheRanksAgreeOn) {
  auto plan = configure(rk, tiny_rank_config());
  ASSERT_TRUE(plan);
  const int64_t planned = plan->kv.config.num_blocks;
  inject(rec.actor, rk, atom::allocate_v, planned / 2); // a driver that lost track of a rank
  run_all_but(rec.actor);
  auto err = expect_error(rk, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::incompatible_specs, "allocate:"));
  EXPECT_THAT(message_of(*err),
              HasSubstr("num_blocks " + std::to_string(planned / 2)
                        + " from the driver differs from " + std::to_string(planned)));
  ASSERT_TRUE(allocate(rk, planned)) << "a refused allocate changes nothing";
}

TEST_F(RankProtocol, ReportsItsCollectiveLedgerStartingWithTheBlockCountAgreement) {
  ASSERT_TRUE(make_ready(rk));
  inject(rec.actor, rk, atom::collectives_v);
  run_all_but(rec.actor);
  auto entries = expect_reply<std::vector<collective_entry>>(rk, rec.actor);
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ(entries->front(),
            (collective_entry{1, "all_reduce(min)", "int64", 1, 8, collective_status::completed}));
}

TEST_F(RankProtocol, HostRanksCreateAndJoinNoNcclCommunicator) {
  inject(rec.actor, rk, atom::unique_id_v, int32_t{1}, uint64_t{1});
  run_all_but(rec.actor);
  auto err = expect_error(rk, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::unsupported, "unique_id:"));
  inject(rec.actor, rk, atom::join_v, communicator_id{{'x'}, 1, 1}, int32_t{0});
  run_all_but(rec.actor);
  err = expect_error(rk, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::unsupported, "join:"));
}

TEST_F(RankProtocol, RejectsAStepBeforeAllocate) {
  ASSERT_TRUE(configure(rk, tiny_rank_config()));
  auto err = rejected_step(rk, admit_request_1());
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "step_plan:"));
  EXPECT_THAT(message_of(*err), HasSubstr("not allocated"));
}

TEST_F(RankProtocol, AValidStepForOneRequestSamplesOneToken) {
  ASSERT_TRUE(make_ready(rk));
  auto done = step(rk, admit_request_1());
  ASSERT_TRUE(done);
  EXPECT_EQ(done->seq, 0u);
  EXPECT_EQ(done->epoch, epoch);
  EXPECT_EQ(done->rank, 0);
  ASSERT_EQ(done->sampled.size(), 1u);
  EXPECT_EQ(done->sampled[0].request_id, 1u);
  // The tokens the attention stack alone generates after the prompt 5 6 7 8 (seed 1).
  const auto want = tiny_reference_tokens({5, 6, 7, 8}, 2, 1);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(done->sampled[0].token, want[0]);
  EXPECT_EQ(done->executed.mode, cudagraph_mode::none);
  // The decode feeds the sampled token back.
  auto next = step(rk, decode_request_1(1, done->sampled[0].token));
  ASSERT_TRUE(next);
  EXPECT_EQ(next->seq, 1u);
  ASSERT_EQ(next->sampled.size(), 1u);
  EXPECT_EQ(next->sampled[0].request_id, 1u);
  EXPECT_EQ(next->sampled[0].token, want[1]);
}

TEST_F(RankProtocol, SplitsAStepOverTwoBuildersWhenAskedForTwoMicrobatches) {
  auto plan = configure(rk, tiny_rank_config(2));
  ASSERT_TRUE(plan);
  ASSERT_TRUE(allocate(rk, plan->kv.config.num_blocks));
  auto two = admit_request_1();
  two.new_requests.push_back({2, 6, 8});
  two.block_updates.push_back({2, 0, 0, {3}});
  two.block_updates.push_back({2, 1, 0, {4}});
  two.scheduled.push_back({2, 0, {1, 2, 3, 4, 5, 6}, true});
  two.num_ubatches = 2;
  inject(rec.actor, rk, two);
  run_once(rk); // validate, apply, then ask both builders and cudagraph at once
  auto builders = scheduled_actors_named("kvactor.builder");
  ASSERT_EQ(builders.size(), 2u);
  std::vector<ubatch_work> work;
  for (const auto& b : builders) {
    auto w = peek_from<ubatch_work>(rk, b);
    ASSERT_TRUE(w);
    work.push_back(std::get<0>(*w));
  }
  std::sort(work.begin(), work.end(),
            [](const ubatch_work& a, const ubatch_work& b) { return a.ubatch < b.ubatch; });
  EXPECT_EQ(work[0].ubatch, 0);
  EXPECT_EQ(work[1].ubatch, 1);
  EXPECT_EQ(work[0].token_start, 0);
  EXPECT_EQ(work[0].token_end, work[1].token_start) << "the slices tile the step";
  EXPECT_EQ(work[1].token_end, 10);
  EXPECT_EQ(work[0].token_end, 5) << "split at num_tokens / 2 (spec 8.1): request 2 straddles";
  // A CPU rank planned no graphs: it runs the batch eagerly without asking cudagraph.
  run_all_but(rec.actor);
  auto done = expect_reply<step_done>(rk, rec.actor);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->executed.mode, cudagraph_mode::none);
  EXPECT_EQ(done->executed.num_reqs, 2);
  EXPECT_EQ(done->executed.num_tokens, 10);
  ASSERT_EQ(done->sampled.size(), 2u);
  EXPECT_EQ(done->sampled[0].request_id, 1u);
  EXPECT_EQ(done->sampled[1].request_id, 2u);
}

TEST_F(RankProtocol, RejectsAStepWithAnUnknownRequestInScheduledUnchanged) {
  auto bad = decode_request_1(1, 9);
  bad.scheduled.push_back({99, 0, {1, 2}, true});
  expect_rejected_unchanged(bad, "scheduled: unknown request 99", {99}, {decode_request_1(1, 9)});
}

TEST_F(RankProtocol, RejectsABlockIdOutOfRangeUnchanged) {
  // Admitting request 2 with a block id past the pool, alongside a valid decode of request 1.
  const int64_t num_blocks = tiny_num_blocks();
  auto bad = decode_request_1(1, 9);
  bad.new_requests = {{2, 3, 4}};
  bad.block_updates = {{2, 0, 0, {3}}, {2, 1, 0, {static_cast<int32_t>(num_blocks)}}};
  bad.scheduled.push_back({2, 0, {1, 2, 3}, true});
  // After the rejection request 2 is unknown: admitting it properly works.
  auto good = bad;
  good.block_updates[1].block_ids = {4};
  expect_rejected_unchanged(bad, "block_updates: block id " + std::to_string(num_blocks), {2},
                            {good});
}

TEST_F(RankProtocol, RejectsAStepWithAGapInSequenceNumbersUnchanged) {
  expect_rejected_unchanged(decode_request_1(2, 9), "seq: gap", {}, {decode_request_1(1, 9)});
}

TEST_F(RankProtocol, RejectsAnotherPlanUnderAnExecutedSeqUnchanged) {
  auto other = admit_request_1();
  other.scheduled[0].token_ids = {5, 6, 7}; // valid on its own (a chunk), but not step 0 again
  expect_rejected_unchanged(other, "seq: step 0 was already executed", {},
                            {decode_request_1(1, 9)});
}

TEST_F(RankProtocol, AnswersACopyOfTheLastStepWithItsFirstAnswerWithoutRunningItAgain) {
  ASSERT_TRUE(make_ready(rk));
  auto first = step(rk, admit_request_1());
  ASSERT_TRUE(first);
  auto again = step(rk, admit_request_1());
  ASSERT_TRUE(again) << "a re-sent step is answered, not rejected";
  EXPECT_EQ(*again, *first) << "the same answer, its timing included: not run twice";
  ASSERT_TRUE(step(rk, decode_request_1(1, 9))) << "the copy did not advance the sequence";
  auto stale = rejected_step(rk, admit_request_1());
  ASSERT_TRUE(stale) << "a copy older than the last step is rejected";
  EXPECT_TRUE(is_kvactor_error(*stale, errc::invalid_argument, "seq: step 0 was already executed"));
}

TEST_F(RankProtocol, TwoCopiesOfAStepSentTogetherGetOneAnswerTwice) {
  ASSERT_TRUE(make_ready(rk));
  inject(rec.actor, rk, admit_request_1());
  inject(rec.actor, rk, admit_request_1());
  run_all_but(rec.actor);
  auto a = expect_reply<step_done>(rk, rec.actor);
  auto b = expect_reply<step_done>(rk, rec.actor);
  ASSERT_TRUE(a);
  ASSERT_TRUE(b) << "the second copy waits for the first's answer, or gets it from memory";
  EXPECT_EQ(*a, *b);
  ASSERT_TRUE(step(rk, decode_request_1(1, 9)));
}

TEST_F(RankProtocol, RejectsAStaleEpochUnchanged) {
  auto stale = decode_request_1(1, 9);
  stale.epoch = epoch - 1;
  expect_rejected_unchanged(stale, "epoch: 0 is stale", {}, {decode_request_1(1, 9)});
}

// The stale step reaches the rank while step 1 is in flight (its builders not yet run): it is
// refused for what it is, stale, not for arriving while the rank is busy.
TEST_F(RankProtocol, AStaleStepIsRefusedAsStaleEvenWhileAStepIsInFlight) {
  ASSERT_TRUE(make_ready(rk));
  ASSERT_TRUE(step(rk, admit_request_1()));
  auto stale = decode_request_1(1, 9);
  stale.epoch = epoch - 1;
  inject(rec.actor, rk, decode_request_1(1, 9));
  inject(rec.actor, rk, stale);
  run_all_but(rec.actor);
  auto err = expect_error(rk, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "epoch: 0 is stale"));
  ASSERT_TRUE(expect_reply<step_done>(rk, rec.actor)) << "the step in flight still finishes";
}

TEST_F(RankProtocol, RejectsNumComputedTokensThatDisagreeUnchanged) {
  auto bad = decode_request_1(1, 9);
  bad.scheduled[0].num_computed_tokens = 3;
  expect_rejected_unchanged(bad, "scheduled: request 1 has num_computed_tokens 3", {1},
                            {decode_request_1(1, 9)});
}

TEST_F(RankProtocol, RejectsAPositionNoBlockCoversUnchanged) {
  // Position 16 needs a second block in each group; the plan gives none.
  auto bad = decode_request_1(1, 9);
  bad.scheduled[0].token_ids.assign(13, 9); // positions 4..16
  expect_rejected_unchanged(bad, "block_updates: the block table of request 1", {1},
                            {decode_request_1(1, 9)});
}

TEST_F(RankProtocol, RejectsAStepOverTheTokenBudgetUnchanged) {
  // 300 tokens for request 2 exceed max_num_batched_tokens (256).
  auto bad = decode_request_1(1, 9);
  bad.new_requests = {{2, 300, 4}};
  std::vector<int32_t> blocks0, blocks1;
  for (int32_t b = 0; b < 19; ++b) {
    blocks0.push_back(3 + 2 * b);
    blocks1.push_back(4 + 2 * b);
  }
  bad.block_updates = {{2, 0, 0, blocks0}, {2, 1, 0, blocks1}};
  bad.scheduled.push_back({2, 0, std::vector<int32_t>(300, 1), true});
  expect_rejected_unchanged(bad, "scheduled: 301 tokens exceed max_num_batched_tokens", {},
                            {decode_request_1(1, 9)});
}

// More requests in one step than max_num_seqs are refused by step_state::validate, next to the
// max_num_batched_tokens check, before anything is applied: the rank replies
// "scheduled: 17 requests exceed max_num_seqs 16", its sequence number is not consumed, and the
// next valid step (seq 1) runs as on a rank that never saw the bad plan. (Before validate bounded
// the request count, cudagraph's dispatch refused it only after the step was applied.)
TEST_F(RankProtocol, RejectsAStepWithMoreRequestsThanMaxNumSeqsUnchanged) {
  // 17 requests in one step; tiny_rank_config() allows 16 sequences.
  auto bad = decode_request_1(1, 9);
  for (int32_t r = 2; r <= 17; ++r) {
    const auto id = static_cast<uint64_t>(r);
    bad.new_requests.push_back({id, 1, 4});
    bad.block_updates.push_back({id, 0, 0, {2 * r - 1}});
    bad.block_updates.push_back({id, 1, 0, {2 * r}});
    bad.scheduled.push_back({id, 0, {r}, true});
  }
  expect_rejected_unchanged(bad, "scheduled: 17 requests exceed max_num_seqs 16", {},
                            {decode_request_1(1, 9)});
}

} // namespace
} // namespace kvactor::test
