// `kvactor run`'s flag core and its restart decision, without running anything.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "deploy/cli.hpp"
#include "deploy/run_modes.hpp"
#include "deploy/run_options.hpp"
#include "deploy/run_session.hpp"

namespace kvactor::test {
namespace {

using ::testing::HasSubstr;

TEST(RunOptions, DefaultsServeKvactorTinyOnTheDeviceAutoPicks) {
  run_flags f;
  f.plan.device = "auto"; // the command line's default for run
  auto o = check_run_flags(f);
  ASSERT_TRUE(o) << o.err().message;
  EXPECT_EQ(o->model, "kvactor-tiny");
  EXPECT_FALSE(o->device) << "auto: resolved when the GPU is probed";
  EXPECT_FALSE(o->cluster);
  EXPECT_EQ(o->prompt_len, (std::pair<int32_t, int32_t>{32, 128}));
  EXPECT_EQ(o->output_len, (std::pair<int32_t, int32_t>{16, 48}));
  EXPECT_EQ(o->arrival_rate, 0.0) << "inf: every request at once";
  EXPECT_EQ(o->cudagraph_memory, int64_t{1} << 30);
  EXPECT_EQ(o->restart, restart_policy::none);
  EXPECT_TRUE(o->kv_cache_memory.empty());
}

TEST(RunOptions, ConvertsDeviceRatesRangesAndOneBudgetPerRank) {
  run_flags f;
  f.plan.device = "gpu";
  f.plan.tensor_parallel_size = 2;
  f.plan.kv_cache_memory = "1GiB";
  f.arrival_rate = "2.5";
  f.prompt_len = "8";
  f.cudagraph_capture = "lazy";
  auto o = check_run_flags(f);
  ASSERT_TRUE(o) << o.err().message;
  EXPECT_EQ(o->device, device_kind::cuda);
  EXPECT_EQ(o->kv_cache_memory, (std::vector<int64_t>{int64_t{1} << 30, int64_t{1} << 30}));
  EXPECT_EQ(o->arrival_rate, 2.5);
  EXPECT_EQ(o->prompt_len, (std::pair<int32_t, int32_t>{8, 8}));
  EXPECT_TRUE(o->cudagraph_lazy);
}

TEST(RunOptions, ClusterOnlyFlagsAreRefusedInALocalRunNamingTheFlag) {
  run_flags rebuild;
  rebuild.restart_policy = "rebuild";
  EXPECT_THAT(check_run_flags(rebuild).err().message,
              HasSubstr("--restart-policy rebuild: only with --nodes"));
  run_flags tls;
  tls.tls_cert = "a.pem";
  EXPECT_THAT(check_run_flags(tls).err().message, HasSubstr("--tls-cert/--tls-key/--tls-ca"));
  run_flags inject;
  inject.nodes = "127.0.0.1:1";
  inject.inject_port = 0;
  EXPECT_THAT(check_run_flags(inject).err().message, HasSubstr("--inject-port: not with --nodes"));
  run_flags path;
  path.step_path = "middleman";
  EXPECT_THAT(check_run_flags(path).err().message, HasSubstr("--step-path: only with --nodes"));
  run_flags spin;
  spin.step_spin_us = 50;
  EXPECT_THAT(check_run_flags(spin).err().message, HasSubstr("--step-spin-us: only with --nodes"));
}

TEST(RunOptions, StepSpinIsOffUnlessAskedForAndReachesTheOptions) {
  run_flags f;
  f.nodes = "127.0.0.1:1";
  auto off = check_run_flags(f);
  ASSERT_TRUE(off) << off.err().message;
  EXPECT_EQ(off->step_spin.count(), 0);
  f.step_spin_us = 150;
  auto on = check_run_flags(f);
  ASSERT_TRUE(on) << on.err().message;
  EXPECT_EQ(on->step_spin.count(), 150);
}

TEST(RunOptions, StepPathIsTheChannelUnlessTheMiddlemanIsAskedFor) {
  run_flags f;
  f.nodes = "127.0.0.1:1";
  auto channel = check_run_flags(f);
  ASSERT_TRUE(channel) << channel.err().message;
  EXPECT_EQ(channel->steps, step_path::channel);
  f.step_path = "middleman";
  auto middleman = check_run_flags(f);
  ASSERT_TRUE(middleman) << middleman.err().message;
  EXPECT_EQ(middleman->steps, step_path::middleman);
  f.step_path = "carrier-pigeon";
  EXPECT_THAT(check_run_flags(f).err().message,
              HasSubstr("--step-path: unknown value 'carrier-pigeon' (expected channel or "
                        "middleman)"));
}

TEST(RunOptions, ABudgetListOfTheWrongLengthNamesKvCacheMemory) {
  run_flags f;
  f.plan.tensor_parallel_size = 2;
  f.plan.kv_cache_memory = "1GiB,1GiB,1GiB";
  EXPECT_THAT(check_run_flags(f).err().message, HasSubstr("--kv-cache-memory: 3 values for 2"));
}

TEST(RunOptions, MaxMessageBytesTakesAByteSizeWithinWhatBaspCanCarry) {
  run_flags f;
  f.plan.device = "auto";
  auto o = check_run_flags(f);
  ASSERT_TRUE(o) << o.err().message;
  EXPECT_EQ(o->transport.frames.max_message_bytes, uint64_t{64} << 20) << "the default";
  f.max_message_bytes = "1GiB";
  o = check_run_flags(f);
  ASSERT_TRUE(o) << o.err().message;
  EXPECT_EQ(o->transport.frames.max_message_bytes, uint64_t{1} << 30);
  for (const auto* bad : {"1KiB", "5GiB"}) {
    f.max_message_bytes = bad;
    o = check_run_flags(f);
    ASSERT_FALSE(o) << bad;
    EXPECT_THAT(o.err().message,
                HasSubstr(std::string("--max-message-bytes: ") + bad + " is outside [65536, "));
  }
  f.max_message_bytes = "lots";
  o = check_run_flags(f);
  ASSERT_FALSE(o);
  EXPECT_THAT(o.err().message, HasSubstr("--max-message-bytes"));
}

TEST(RestartDecision, RebuildsOnALostRankOrAFailedCollectiveByCodeNotByMessage) {
  EXPECT_TRUE(rebuild_helps(make_error(errc::rank_lost, "")));
  EXPECT_TRUE(rebuild_helps(make_error(errc::collective_failed, "")));
  // The words a lost node's message holds do not make another error restartable.
  EXPECT_FALSE(rebuild_helps(make_error(errc::invalid_argument, "rank 1 is unreachable: x")));
  EXPECT_FALSE(rebuild_helps(make_error(errc::step_failed, "rank 0 stopped: killed")));
  EXPECT_FALSE(rebuild_helps(error{}));
}

TEST(StartExitCode, IsBadInputForAFlagModelOrBudgetAndAFailureWhenTheRanksFail) {
  EXPECT_EQ(start_exit_code(make_error(errc::invalid_argument, "")), exit_bad_input);
  EXPECT_EQ(start_exit_code(make_error(errc::insufficient_memory, "")), exit_bad_input);
  EXPECT_EQ(start_exit_code(make_error(errc::invalid_split, "")), exit_bad_input);
  EXPECT_EQ(start_exit_code(make_error(errc::rank_lost, "")), exit_failure);
  EXPECT_EQ(start_exit_code(make_error(errc::collective_failed, "")), exit_failure);
  EXPECT_EQ(start_exit_code(make_error(errc::step_failed, "")), exit_failure);
}

} // namespace
} // namespace kvactor::test
