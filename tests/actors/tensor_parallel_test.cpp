// Tensor-parallel CPU ranks on the real scheduler, spawned as `kvactor run` spawns them
// (spawn_rank_group): they agree on the KV cache block count in a collective, a driver minimum
// that differs is caught naming both values, and a rank that stops answering inside the step's
// collectives is diagnosed from every rank's ledger, with every request reported, in seconds.
#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/rank/group.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/real_system_fixture.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

class TensorParallel : public real_system_fixture {
protected:
  std::vector<rank_actor> ranks;
  std::vector<rank_config> configs;

  ~TensorParallel() override {
    for (auto& r : ranks)
      caf::anon_send_exit(r, caf::exit_reason::kill);
  }

  void spawn_group(int32_t world, std::optional<collective_stall> stall = std::nullopt,
                   std::chrono::milliseconds timeout = 30s) {
    rank_group_options opt;
    opt.world = world;
    opt.stall = stall;
    opt.collective_timeout = timeout;
    ranks = spawn_rank_group(sys, opt);
    for (int32_t r = 0; r < world; ++r) {
      auto c = tiny_rank_config();
      c.rank = r;
      c.tensor_parallel_size = world;
      configs.push_back(c);
    }
  }

  // Configures every rank; the driver's minimum of their planned block counts (0 on failure).
  int64_t configure_all() {
    int64_t min_blocks = 0;
    for (size_t r = 0; r < ranks.size(); ++r) {
      auto plan = request_within<rank_plan>(ranks[r], atom::configure_v, configs[r]);
      if (!plan) {
        ADD_FAILURE() << "configure rank " << r << ": " << message_of(plan.error());
        return 0;
      }
      const auto n = plan->kv.config.num_blocks;
      min_blocks = r == 0 ? n : std::min(min_blocks, n);
    }
    return min_blocks;
  }

  // allocate(n) to every rank at once (they meet in a collective), then every answer.
  std::vector<caf::expected<rank_ready>> allocate_all(int64_t n) {
    std::vector<decltype(self->request(ranks[0], reply_timeout, atom::allocate_v, n))> pending;
    for (auto& r : ranks)
      pending.push_back(self->request(r, reply_timeout, atom::allocate_v, n));
    std::vector<caf::expected<rank_ready>> out;
    for (auto& p : pending)
      p.receive([&](rank_ready& x) { out.emplace_back(std::move(x)); },
                [&](caf::error& e) { out.emplace_back(std::move(e)); });
    return out;
  }
};

TEST_F(TensorParallel, TwoRanksAgreeOnTheBlockCountInOneCollective) {
  spawn_group(2);
  const int64_t n = configure_all();
  ASSERT_EQ(n, tiny_expected_blocks(2)) << "one KV head per rank: half the block, twice the count";
  for (auto& ready : allocate_all(n)) {
    ASSERT_TRUE(ready) << message_of(ready.error());
    EXPECT_EQ(ready->num_blocks, n);
  }
  for (auto& r : ranks) {
    auto ledger = request_within<std::vector<collective_entry>>(r, atom::collectives_v);
    ASSERT_TRUE(ledger);
    EXPECT_EQ(*ledger, (std::vector<collective_entry>{
                           {1, "all_reduce(min)", "int64", 1, 8, collective_status::completed}}));
  }
}

TEST_F(TensorParallel, ADriverMinimumOtherThanTheRanksOwnIsRefusedNamingBothValues) {
  spawn_group(2);
  const int64_t n = configure_all();
  ASSERT_EQ(n, tiny_expected_blocks(2));
  for (auto& ready : allocate_all(n - 1)) {
    ASSERT_FALSE(ready);
    EXPECT_TRUE(is_kvactor_error(ready.error(), errc::incompatible_specs, "allocate:"));
    EXPECT_THAT(message_of(ready.error()),
                HasSubstr("num_blocks " + std::to_string(n - 1) + " from the driver differs from "
                          + std::to_string(n) + ", the minimum of the planned block counts the 2 "
                          + "rank(s) agreed on"));
  }
}

TEST_F(TensorParallel, ARankThatStopsAnsweringInAStepIsDiagnosedFromEveryLedger) {
  // Collective #1 agrees on the block count; step 0 all-reduces once per layer (4 layers, #2 to
  // #5); rank 1 stops answering before #4, in the middle of step 0.
  spawn_group(2, collective_stall{1, 4}, 300ms);
  driver_setup setup{ranks, configs, 1, {}, nullptr};
  setup.collective_timeout = 300ms;
  auto drv = spawn(driver, std::move(setup));
  ASSERT_TRUE(request_within<std::vector<rank_ready>>(drv, atom::start_v));
  std::vector<request_spec> specs;
  for (uint64_t id = 0; id < 3; ++id)
    specs.push_back({id, std::vector<int32_t>(10, static_cast<int32_t>(id + 1)), 4, 0});
  ASSERT_TRUE(request_within<int64_t>(drv, atom::submit_v, specs));
  const auto started = std::chrono::steady_clock::now();
  auto s = request_within<run_summary>(drv, atom::run_v);
  ASSERT_TRUE(s) << message_of(s.error());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 15s) << "no hang: 0.3 s timeouts";
  EXPECT_THAT(s->error.message,
              HasSubstr("step 0: a collective failed: rank 1 is at all_reduce(sum) #3"));
  EXPECT_THAT(s->error.message, HasSubstr("completed) and has not entered #4; rank 0 waits in "
                                          "all_reduce(sum) #4"));
  EXPECT_THAT(s->error.message, HasSubstr("rank(s) 1 did not enter it")) << "rank 0's own error";
  EXPECT_EQ(s->failed, 3);
  for (const auto& r : s->results)
    EXPECT_THAT(r.failure, HasSubstr("rank 1 is at all_reduce(sum) #3"));
}

} // namespace
} // namespace kvactor::test
