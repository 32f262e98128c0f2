// Chaos in the message stream (issue "Reliability", part 3): the links between the driver and its
// ranks lose, repeat and delay messages (kvactor run --chaos SEED:RATE), and ranks stall or die at
// chosen steps. For every seed: no run hangs past its timeouts, every request finishes or is
// reported failed with a reason, every finished request's tokens equal the calm run's, and no KV
// cache block is left held. KVACTOR_CHAOS_SEEDS (default 4) and KVACTOR_CHAOS_FIRST_SEED
// (default 1) choose the seeds; tests/chaos/run_chaos.sh runs a thousand and more.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/rank/group.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/real_system_fixture.hpp"
#include "tests/support/sanitizer_slowdown.hpp"
#include "tests/support/tiny_model.hpp"

namespace kvactor::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

double rate_from_env() {
  const char* v = std::getenv("KVACTOR_CHAOS_RATE");
  return v != nullptr && *v != '\0' ? std::strtod(v, nullptr) : 0.3;
}

struct run_case {
  int32_t world = 1;
  std::optional<chaos_spec> chaos = std::nullopt;
  std::vector<step_fault> faults = {};
  std::chrono::milliseconds step_timeout = 30s;
  std::chrono::milliseconds collective_timeout = 30s;
};

struct outcome {
  run_summary summary;
  run_progress last; // the driver's last progress report: the links' fault counts
  std::chrono::duration<double> took{};
};

class Chaos : public real_system_fixture {
protected:
  // One run with fresh ranks and driver; a failure to start or run is a test failure.
  outcome serve(const run_case& c) {
    rank_group_options opt;
    opt.world = c.world;
    opt.collective_timeout = c.collective_timeout;
    opt.step_faults = c.faults;
    opt.chaos = c.chaos;
    auto ranks = spawn_rank_group(sys, opt);
    std::vector<rank_config> configs;
    for (int32_t r = 0; r < c.world; ++r) {
      auto cfg = tiny_rank_config();
      cfg.rank = r;
      cfg.tensor_parallel_size = c.world;
      configs.push_back(cfg);
    }
    auto last = std::make_shared<run_progress>();
    driver_setup setup{ranks, configs, 1, [last](const run_progress& p) { *last = p; }, nullptr};
    setup.collective_timeout = c.collective_timeout;
    setup.chaos = c.chaos;
    setup.deadlines.retransmit = c.chaos.has_value();
    setup.deadlines.step_timeout = c.step_timeout;
    auto drv = sys.spawn(driver, std::move(setup));
    outcome out;
    const auto t0 = std::chrono::steady_clock::now();
    if (auto ready = request_within<std::vector<rank_ready>>(drv, atom::start_v); !ready)
      ADD_FAILURE() << "start: " << message_of(ready.error());
    else if (auto queued = request_within<int64_t>(drv, atom::submit_v, tiny_six_requests());
             !queued)
      ADD_FAILURE() << "submit: " << message_of(queued.error());
    else if (auto s = request_within<run_summary>(drv, atom::run_v); !s)
      ADD_FAILURE() << "run: " << message_of(s.error());
    else
      out.summary = std::move(*s);
    out.took = std::chrono::steady_clock::now() - t0;
    out.last = *last;
    caf::anon_send_exit(drv, caf::exit_reason::kill);
    for (auto& r : ranks)
      caf::anon_send_exit(r, caf::exit_reason::kill);
    return out;
  }

  static std::map<uint64_t, std::vector<int32_t>> tokens_of(const run_summary& s) {
    std::map<uint64_t, std::vector<int32_t>> out;
    for (const auto& r : s.results)
      if (r.finished) out[r.request_id] = r.output;
    return out;
  }

  // The invariants every run keeps, whatever befell it.
  static void expect_invariants(const outcome& o, const run_summary& calm,
                                const std::string& what) {
    const auto& s = o.summary;
    EXPECT_EQ(s.finished + s.failed, 6) << what << ": every request finished or failed";
    EXPECT_EQ(std::ssize(s.results), 6) << what;
    const auto reference = tokens_of(calm);
    for (const auto& r : s.results) {
      if (!r.finished) {
        EXPECT_FALSE(r.failure.empty())
            << what << ": request " << r.request_id << " failed silently";
        continue;
      }
      EXPECT_EQ(r.output, reference.at(r.request_id))
          << what << ": request " << r.request_id << "'s tokens differ from the calm run's";
    }
    EXPECT_EQ(s.kv_blocks_held_at_end, 0) << what << ": KV cache blocks leaked";
    // The timeouts a case waits out are 2 s or less, times the sanitizer's slowdown.
    EXPECT_LT(o.took, 20s * sanitizer_slowdown()) << what << ": past every timeout";
  }

  static std::vector<uint64_t> seeds() {
    const uint64_t first = env_or("KVACTOR_CHAOS_FIRST_SEED", 1);
    const uint64_t n = env_or("KVACTOR_CHAOS_SEEDS", 4);
    std::vector<uint64_t> out;
    for (uint64_t s = first; s < first + n; ++s)
      out.push_back(s);
    return out;
  }
};

TEST_F(Chaos, EveryRequestFinishesWithTheCalmRunsTokensWhateverTheLinksDo) {
  const double rate = rate_from_env();
  link_counts total;
  int64_t resent = 0, runs = 0;
  for (int32_t world : {1, 2}) {
    const auto calm = serve({world}).summary;
    ASSERT_EQ(calm.finished, 6) << "TP " << world << " calm: " << calm.error.message;
    for (auto seed : seeds()) {
      const auto what = "TP " + std::to_string(world) + " seed " + std::to_string(seed);
      const auto o = serve({world, chaos_spec{seed, rate}});
      expect_invariants(o, calm, what);
      EXPECT_EQ(o.summary.finished, 6)
          << what << ": a lost message lost a request: " << o.summary.error.message;
      EXPECT_EQ(o.summary.error.code, errc::no_error) << what << ": " << o.summary.error.message;
      total.messages += o.last.chaos.messages;
      total.dropped += o.last.chaos.dropped;
      total.duplicated += o.last.chaos.duplicated;
      total.delayed += o.last.chaos.delayed;
      resent += o.last.steps_resent;
      ++runs;
      if (HasFailure()) return; // the first seed that breaks an invariant is the one to read
    }
  }
  std::cout << "chaos: " << runs << " runs at rate " << rate << ": " << total.messages
            << " messages, " << total.dropped << " lost, " << total.duplicated << " repeated, "
            << total.delayed << " late; " << resent << " step copies re-sent\n";
  EXPECT_GT(total.dropped, 0) << "the links lost nothing: the test tested nothing";
  EXPECT_GT(total.duplicated, 0);
  EXPECT_GT(total.delayed, 0);
  EXPECT_GT(resent, 0) << "a lost message is recovered by re-sending";
}

TEST_F(Chaos, ARankThatStallsIsNamedAtTheStepTimeoutWithEveryRequestReported) {
  const auto calm = serve({1}).summary;
  run_case c{1};
  c.faults = {{step_fault::kind::stall, 0, 2}};
  // A live step takes well under the timeout, also on a loaded machine or in a sanitizer build.
  c.step_timeout = 2000ms * sanitizer_slowdown();
  const auto o = serve(c);
  expect_invariants(o, calm, "stalled at step 2");
  EXPECT_EQ(o.summary.error.code, errc::rank_lost);
  EXPECT_THAT(
      o.summary.error.message,
      HasSubstr(fmt::format("step 2: rank 0 did not answer within {:.1f} s (--step-timeout)",
                            2.0 * sanitizer_slowdown())));
  EXPECT_EQ(o.summary.failed, 6) << "no request finishes in 2 steps";
  for (const auto& r : o.summary.results)
    EXPECT_THAT(r.failure, HasSubstr("rank 0 did not answer")) << r.request_id;
}

TEST_F(Chaos, ARankStalledBesideItsPeerIsNamedWhenThePeersCollectiveTimesOut) {
  const auto calm = serve({2}).summary;
  run_case c{2};
  c.faults = {{step_fault::kind::stall, 1, 2}};
  c.collective_timeout = 300ms;
  const auto o = serve(c);
  expect_invariants(o, calm, "rank 1 stalled at step 2");
  EXPECT_EQ(o.summary.error.code, errc::collective_failed) << o.summary.error.message;
  EXPECT_THAT(o.summary.error.message, HasSubstr("step 2: a collective failed"));
  EXPECT_THAT(o.summary.error.message, HasSubstr("rank 1"));
}

TEST_F(Chaos, AKilledRankEndsTheRunNamedWithEveryRequestReported) {
  const auto calm = serve({2}).summary;
  run_case c{2};
  c.faults = {{step_fault::kind::kill, 1, 3}};
  c.collective_timeout = 500ms; // rank 0 waits for its dead peer this long before it stops
  const auto o = serve(c);
  expect_invariants(o, calm, "rank 1 killed at step 3");
  EXPECT_EQ(o.summary.error.code, errc::rank_lost) << o.summary.error.message;
  EXPECT_THAT(o.summary.error.message, HasSubstr("rank 1 stopped"));
}

TEST_F(Chaos, EveryRequestIsFinishedOrReportedWhenRanksAlsoStallOrDieUnderChaos) {
  // Per seed: the links disturbed, and one rank killed or stalled at a step the seed picks.
  const double rate = rate_from_env();
  const auto calm = serve({2}).summary;
  ASSERT_EQ(calm.finished, 6);
  ASSERT_GT(calm.steps, 8) << "every fault below (steps 0 to 8) lands inside the run";
  int64_t finished = 0, failed = 0;
  for (auto seed : seeds()) {
    run_case c{2, chaos_spec{seed, rate}};
    const auto what = "seed " + std::to_string(seed);
    const auto kind = seed % 2 == 0 ? step_fault::kind::kill : step_fault::kind::stall;
    c.faults = {{kind, static_cast<int32_t>(seed / 2 % 2), seed / 4 % 9}};
    c.step_timeout = 1s;
    c.collective_timeout = 1s;
    const auto o = serve(c);
    expect_invariants(o, calm, what);
    EXPECT_NE(o.summary.error.code, errc::no_error) << what << ": the fault went unnoticed";
    finished += o.summary.finished;
    failed += o.summary.failed;
    if (HasFailure()) return;
  }
  std::cout << "chaos with faults: " << seeds().size() << " runs: " << finished
            << " requests finished, " << failed << " failed with a reason\n";
}

TEST_F(Chaos, DetachedRanksWhoseDriverIsGoneStopInsteadOfHoldingTheirThreadsAndMemory) {
  // A GPU node's ranks are detached: nothing but their driver would ever stop them. The driver
  // here is a scoped actor that configures both ranks of a TP 2 group and then ends.
  rank_group_options opt;
  opt.world = 2;
  auto ranks = spawn_rank_group(sys, opt);
  for (auto& r : ranks)
    self->monitor(r);
  {
    caf::scoped_actor driver{sys};
    for (int32_t r = 0; r < 2; ++r) {
      auto cfg = tiny_rank_config();
      cfg.rank = r;
      cfg.tensor_parallel_size = 2;
      driver->request(ranks[static_cast<size_t>(r)], reply_timeout, atom::configure_v, cfg)
          .receive([](rank_plan&) {},
                   [&](caf::error& e) { ADD_FAILURE() << "configure: " << message_of(e); });
    }
  } // the driver ends
  for (int n = 0; n < 2; ++n)
    self->receive(
        [](const caf::down_msg& m) { EXPECT_EQ(m.reason, caf::exit_reason::user_shutdown); },
        caf::after(reply_timeout) >> [] { ADD_FAILURE() << "a rank outlived its driver"; });
}

} // namespace
} // namespace kvactor::test
