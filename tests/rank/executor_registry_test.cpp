// The executor seam: executors registered by name, chosen from the rank's configuration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "actors/rank/executor_registry.hpp"

using namespace kvactor;
using ::testing::HasSubstr;

namespace {

expected<std::unique_ptr<step_executor>> no_executor(const executor_context&) {
  return make_error(errc::unsupported, "not built in this test");
}

rank_config on(device_kind device, std::string executor = {}) {
  rank_config c;
  c.device = device;
  c.executor = std::move(executor);
  return c;
}

} // namespace

TEST(ExecutorRegistry, BuiltinsAreTheCpuAndCudaStacksTheDecoderAndTheBareProtocol) {
  auto r = executor_registry::with_builtins();
  EXPECT_EQ(r.names(), (std::vector<std::string>{"cpu", "cuda", "synthetic", "protocol"}));
}

TEST(ExecutorRegistry, ADeviceWithoutANamedExecutorRunsItsOwn) {
  auto r = executor_registry::with_builtins();
  auto cpu = r.choose(on(device_kind::cpu));
  ASSERT_TRUE(cpu) << cpu.err().message;
  EXPECT_EQ((*cpu)->name, "cpu");
  auto cuda = r.choose(on(device_kind::cuda));
  ASSERT_TRUE(cuda);
  EXPECT_EQ((*cuda)->name, "cuda");
  auto protocol = r.choose(on(device_kind::cuda, "protocol"));
  ASSERT_TRUE(protocol);
  EXPECT_EQ((*protocol)->name, "protocol");
}

TEST(ExecutorRegistry, AnUnknownExecutorIsAnErrorListingTheRegisteredOnes) {
  auto r = executor_registry::with_builtins();
  auto e = r.choose(on(device_kind::cpu, "tensorrt"));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.err().code, errc::invalid_argument);
  EXPECT_THAT(e.err().message, HasSubstr("executor: 'tensorrt' is not registered"));
  EXPECT_THAT(e.err().message, HasSubstr("cpu, cuda, synthetic, protocol"));
}

TEST(ExecutorRegistry, AnExecutorRefusesADeviceItDoesNotRunOn) {
  auto r = executor_registry::with_builtins();
  auto e = r.choose(on(device_kind::cpu, "cuda"));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.err().code, errc::unsupported);
  EXPECT_THAT(e.err().message, HasSubstr("'cuda' does not run on device cpu"));
}

TEST(ExecutorRegistry, RefusesAnEmptyDuplicateDevicelessOrFactorylessEntry) {
  executor_registry r;
  ASSERT_TRUE(r.add({"toy", {device_kind::cpu}, no_executor}));
  auto dup = r.add({"toy", {device_kind::cpu}, no_executor});
  ASSERT_FALSE(dup);
  EXPECT_THAT(dup.err().message, HasSubstr("'toy' is already registered"));
  EXPECT_THAT(r.add({"", {device_kind::cpu}, no_executor}).err().message,
              HasSubstr("executor name: must not be empty"));
  EXPECT_THAT(r.add({"x", {}, no_executor}).err().message, HasSubstr("devices: none given"));
  EXPECT_THAT(r.add({"y", {device_kind::cpu}, {}}).err().message, HasSubstr("make: no factory"));
  EXPECT_EQ(r.names(), std::vector<std::string>{"toy"});
}

TEST(ExecutorRegistry, TheProtocolExecutorSamplesTokenZeroForEveryRequest) {
  auto r = executor_registry::with_builtins();
  rank_config cfg = on(device_kind::cpu, "protocol");
  model_layout model;
  auto ex = r.find("protocol")->make({cfg, model, nullptr, 0});
  ASSERT_TRUE(ex) << ex.err().message;
  step_batch b;
  b.sample_ids = {4, 9};
  auto sampled = (*ex)->run(b, {});
  ASSERT_TRUE(sampled);
  EXPECT_EQ(sampled->tokens, (std::vector<int32_t>{0, 0}));
  EXPECT_TRUE((*ex)->ledger().empty()) << "it holds no memory";
}
