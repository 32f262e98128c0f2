// End to end on the real scheduler: a driver and one real rank serve kvactor-tiny on the CPU, as
// `kvactor run` wires them (deploy/run_command.cpp). Every request finishes, and the output is a
// function of the seed alone: the same seed gives the same digest, and splitting steps into two
// microbatches changes nothing.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/driver/actor.hpp"
#include "actors/rank/actor.hpp"
#include "actors/spawn_plain.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/real_system_fixture.hpp"
#include "tests/support/tiny_model.hpp"
#include "tests/support/tiny_reference.hpp"

namespace kvactor::test {
namespace {

class EndToEnd : public real_system_fixture {
protected:
  // start -> submit -> run with fresh actors; a failure is reported and gives an empty summary.
  run_summary serve(int32_t num_ubatches, uint64_t seed,
                    std::function<void(const std::vector<sampled_token>&)> on_tokens = {}) {
    auto cfg = tiny_rank_config(num_ubatches, seed);
    auto rk = spawn(plain<&rank>, nullptr);
    driver_setup setup;
    setup.ranks = {rk};
    setup.configs = {cfg};
    setup.on_tokens = std::move(on_tokens);
    auto drv = spawn(driver, std::move(setup));
    auto ready = request_within<std::vector<rank_ready>>(drv, atom::start_v);
    if (!ready) {
      ADD_FAILURE() << "start: " << message_of(ready.error());
      return {};
    }
    EXPECT_EQ(ready->size(), 1u);
    auto queued = request_within<int64_t>(drv, atom::submit_v, tiny_six_requests());
    if (!queued) {
      ADD_FAILURE() << "submit: " << message_of(queued.error());
      return {};
    }
    EXPECT_EQ(*queued, 6);
    auto summary = request_within<run_summary>(drv, atom::run_v);
    if (!summary) {
      ADD_FAILURE() << "run: " << message_of(summary.error());
      return {};
    }
    return std::move(*summary);
  }
};

TEST_F(EndToEnd, OneRankServesEveryRequestOfKvactorTinyToTheEnd) {
  // Every output equals what the attention stack alone generates for that prompt, one request at
  // a time (tests/support/tiny_reference.hpp): bit-exact greedy tokens, since batching, chunked
  // prefill and block placement do not change the stack's arithmetic.
  auto s = serve(1, 1);
  EXPECT_EQ(s.finished, 6);
  EXPECT_EQ(s.failed, 0);
  ASSERT_EQ(s.results.size(), 6u);
  const auto specs = tiny_six_requests();
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_TRUE(s.results[i].finished) << "request " << i << ": " << s.results[i].failure;
    EXPECT_EQ(s.results[i].output.size(), static_cast<size_t>(specs[i].max_output_tokens))
        << "request " << i;
    EXPECT_EQ(s.results[i].output,
              tiny_reference_tokens(specs[i].prompt, specs[i].max_output_tokens, 1))
        << "request " << i;
  }
  EXPECT_EQ(s.prompt_tokens, 258);
  EXPECT_EQ(s.eager_steps, s.steps) << "a CPU rank runs every step eagerly";
  EXPECT_FALSE(s.output_digest.empty());
}

TEST_F(EndToEnd, TheTokensStreamedStepByStepAreEachRequestsOutputInOrder) {
  std::map<uint64_t, std::vector<int32_t>> streamed;
  int32_t calls = 0;
  auto s = serve(1, 1, [&](const std::vector<sampled_token>& step) {
    ++calls;
    for (const auto& t : step)
      streamed[t.request_id].push_back(t.token);
  });
  ASSERT_EQ(s.results.size(), 6u);
  for (const auto& r : s.results)
    EXPECT_EQ(streamed[r.request_id], r.output) << "request " << r.request_id;
  EXPECT_EQ(calls, s.steps) << "one call per applied step";
}

TEST_F(EndToEnd, TheSameSeedGivesTheSameOutputDigest) {
  auto a = serve(1, 7);
  auto b = serve(1, 7);
  ASSERT_EQ(a.finished, 6);
  ASSERT_EQ(b.finished, 6);
  EXPECT_EQ(a.output_digest, b.output_digest);
  EXPECT_EQ(a.results, b.results);
  EXPECT_NE(serve(1, 8).output_digest, a.output_digest) << "the digest depends on the weights";
}

TEST_F(EndToEnd, TwoMicrobatchesGiveTheSameOutputDigestAsOne) {
  auto one = serve(1, 3);
  auto two = serve(2, 3);
  ASSERT_EQ(one.finished, 6);
  ASSERT_EQ(two.finished, 6);
  EXPECT_EQ(one.output_digest, two.output_digest);
  for (size_t i = 0; i < one.results.size() && i < two.results.size(); ++i)
    EXPECT_EQ(one.results[i].output, two.results[i].output) << "request " << i;
}

} // namespace
} // namespace kvactor::test
