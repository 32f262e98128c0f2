// The executor seam end to end: an executor the rank has never heard of, registered by name and
// named in rank_config::executor, runs the rank's steps; the rank actor is not edited for it.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/rank/actor.hpp"
#include "actors/rank/executor_registry.hpp"
#include "tests/support/deterministic_fixture.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/recorder.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;

// The minimal executor of actors/rank/executor_registry.hpp: every sampled request gets 100 plus
// its number of scheduled tokens, so the test sees the batch reached it.
class counting_executor final : public step_executor {
public:
  status bind(std::vector<kernels::kv_view> views, std::vector<std::string> names,
              int32_t) override {
    bound_layers = names.size();
    (void)views;
    return ok();
  }
  expected<kernels::sampled_rows> run(const step_batch& b,
                                      const std::vector<executed_ubatch>& ubatches) override {
    ++steps;
    kernels::sampled_rows out;
    for (size_t i = 0; i < b.sample_ids.size(); ++i)
      out.tokens.push_back(100 + b.num_tokens());
    (void)ubatches;
    return out;
  }
  std::vector<memory_entry> ledger() const override { return {{"counting executor", 42}}; }
  const char* device() const override { return "cpu"; }

  size_t bound_layers = 0;
  int steps = 0;
};

class ExecutorSeam : public deterministic_fixture {
protected:
  recorder_handle rec = track(spawn_recorder(sys));
  counting_executor* made = nullptr; // owned by the rank once built

  rank_actor spawn_with_counting_executor() {
    auto registry = std::make_shared<executor_registry>(executor_registry::with_builtins());
    EXPECT_TRUE(
        registry->add({"counting",
                       {device_kind::cpu},
                       [this](const executor_context&) -> expected<std::unique_ptr<step_executor>> {
                         auto ex = std::make_unique<counting_executor>();
                         made = ex.get();
                         return std::unique_ptr<step_executor>(std::move(ex));
                       }}));
    rank_runtime rt;
    rt.executors = registry;
    auto r = spawn(rank_with, rt);
    run_all();
    return r;
  }

  template <class T, class... Ts>
  std::optional<T> ask(const rank_actor& r, Ts... xs) {
    inject(rec.actor, r, xs...);
    run_all_but(rec.actor);
    return expect_reply<T>(r, rec.actor);
  }
};

TEST_F(ExecutorSeam, ARegisteredExecutorNamedInTheConfigRunsTheRanksSteps) {
  auto rk = spawn_with_counting_executor();
  auto cfg = tiny_rank_config();
  cfg.executor = "counting";
  auto plan = ask<rank_plan>(rk, atom::configure_v, cfg);
  ASSERT_TRUE(plan);
  ASSERT_NE(made, nullptr) << "the rank built the registered executor";
  ASSERT_TRUE(ask<rank_ready>(rk, atom::allocate_v, plan->kv.config.num_blocks));
  EXPECT_EQ(made->bound_layers, 4u) << "kvactor-tiny's four layers are bound to it";
  step_plan p;
  p.epoch = 1;
  p.new_requests = {{1, 4, 8}};
  p.block_updates = {{1, 0, 0, {1}}, {1, 1, 0, {2}}};
  p.scheduled = {{1, 0, {5, 6, 7, 8}, true}};
  auto done = ask<step_done>(rk, p);
  ASSERT_TRUE(done);
  ASSERT_EQ(done->sampled.size(), 1u);
  EXPECT_EQ(done->sampled[0].token, 104) << "100 + the step's 4 tokens";
  EXPECT_EQ(made->steps, 1);
  auto ledger = ask<std::vector<memory_entry>>(rk, atom::ledger_v);
  ASSERT_TRUE(ledger);
  EXPECT_THAT(*ledger, ::testing::Contains(memory_entry{"counting executor", 42}));
}

TEST_F(ExecutorSeam, AnUnregisteredExecutorFailsConfigureNamingTheRegisteredOnes) {
  auto rk = spawn_with_counting_executor();
  auto cfg = tiny_rank_config();
  cfg.executor = "tensorrt";
  inject(rec.actor, rk, atom::configure_v, cfg);
  run_all_but(rec.actor);
  auto err = expect_error(rk, rec.actor);
  ASSERT_TRUE(err);
  EXPECT_TRUE(is_kvactor_error(*err, errc::invalid_argument, "executor: 'tensorrt'"));
  EXPECT_THAT(message_of(*err), HasSubstr("cpu, cuda, synthetic, protocol, counting"));
}

} // namespace
} // namespace kvactor::test
