// How `kvactor run` places tensor-parallel ranks and picks their communicator: --gpu-ids and
// --communicator. The checks that come before any GPU is counted run on every machine; where the
// machine has no GPU the placement ends at "not visible", which is checked too.
#include <gtest/gtest.h>

#include "deploy/tp_flags.hpp"
#include "kvactor/kernels/device_runtime.h"

namespace kvactor {
namespace {

tp_flags flags(std::string communicator, std::string gpu_ids = "") {
  tp_flags f;
  f.communicator = std::move(communicator);
  f.gpu_ids = std::move(gpu_ids);
  return f;
}

std::string error_of(const expected<tp_setup>& r) {
  return r ? std::string{"(no error)"} : r.err().message;
}

TEST(TpFlags, GpuIdsAreOnePerRankEachACudaOrdinal) {
  for (auto [ids, says] : std::vector<std::pair<std::string, std::string>>{
           {"0,0", "'0,0' names 2 GPU(s) for 4 rank(s)"},
           {"0,0,x,0", "'x' in '0,0,x,0' is not a CUDA device ordinal"},
           {"0,,0,0", "'' in '0,,0,0' is not a CUDA device ordinal"},
           {"0,0,0,-1", "'-1' in '0,0,0,-1' is not a CUDA device ordinal"}}) {
    auto r = resolve_tp_flags(flags("auto", ids), device_kind::cuda, 4);
    ASSERT_FALSE(r) << ids;
    EXPECT_NE(error_of(r).find("--gpu-ids: " + says), std::string::npos) << error_of(r);
  }
}

TEST(TpFlags, RanksEitherAllShareOneGpuOrEachHaveTheirOwn) {
  auto r = resolve_tp_flags(flags("auto", "0,0,1,1"), device_kind::cuda, 4);
  EXPECT_NE(error_of(r).find("shares some GPUs and not others"), std::string::npos) << error_of(r);
}

TEST(TpFlags, NcclRefusesRanksThatShareAGpuAndDeviceRefusesRanksThatDoNot) {
  auto nccl = resolve_tp_flags(flags("nccl", "0,0"), device_kind::cuda, 2);
  EXPECT_NE(error_of(nccl).find("NCCL refuses two ranks on one GPU (--gpu-ids '0,0'); ranks "
                                "sharing a GPU meet through --communicator device"),
            std::string::npos)
      << error_of(nccl);
  auto device = resolve_tp_flags(flags("device", "0,1"), device_kind::cuda, 2);
  EXPECT_NE(error_of(device).find("--communicator device: the device-local communicator joins "
                                  "ranks that share one GPU"),
            std::string::npos)
      << error_of(device);
}

TEST(TpFlags, CpuRanksTakeNoGpuIdsAndNoDeviceCommunicator) {
  auto ids = resolve_tp_flags(flags("auto", "0,0"), device_kind::cpu, 2);
  EXPECT_NE(error_of(ids).find("--gpu-ids: '0,0' places GPU ranks"), std::string::npos)
      << error_of(ids);
  auto device = resolve_tp_flags(flags("device"), device_kind::cpu, 2);
  EXPECT_NE(error_of(device).find("--communicator device: the device-local communicator joins "
                                  "GPU ranks"),
            std::string::npos)
      << error_of(device);
}

TEST(TpFlags, MoreThanEightRanksOnOneGpuAreRefused) {
  auto r = resolve_tp_flags(flags("auto", "0,0,0,0,0,0,0,0,0"), device_kind::cuda, 9);
  ASSERT_FALSE(r);
  // A CPU-only build has no device-local communicator at all; a CUDA one joins at most 8.
  EXPECT_TRUE(error_of(r).find("joins at most 8") != std::string::npos
              || error_of(r).find("not visible") != std::string::npos)
      << error_of(r);
}

TEST(TpFlags, RanksSharingAVisibleGpuMeetThroughTheDeviceLocalCommunicator) {
  std::string why;
  if (kernels::gpu_count(&why) < 1) {
    auto r = resolve_tp_flags(flags("auto", "0,0,0,0"), device_kind::cuda, 4);
    EXPECT_NE(error_of(r).find("--gpu-ids: GPU 0 is not visible (0 visible"), std::string::npos)
        << error_of(r);
    GTEST_SKIP() << "no GPU: " << why << " (the refusal above was checked)";
  }
  for (auto [communicator, ids] : std::vector<std::pair<std::string, std::string>>{
           {"auto", "0,0,0,0"}, {"device", "0,0,0,0"}, {"device", ""}}) {
    auto r = resolve_tp_flags(flags(communicator, ids), device_kind::cuda, 4);
    ASSERT_TRUE(r) << error_of(r);
    EXPECT_TRUE(r->device_local);
    EXPECT_FALSE(r->nccl);
    EXPECT_EQ(r->gpus, (std::vector<int32_t>{0, 0, 0, 0}));
  }
}

TEST(TpFlags, AFailedCaptureIsInjectedIntoOneGpuRankByNumber) {
  auto f = flags("auto");
  f.debug_fail_capture = "1:3";
  auto cpu = resolve_tp_flags(f, device_kind::cpu, 2);
  ASSERT_FALSE(cpu);
  EXPECT_NE(error_of(cpu).find("--debug-fail-capture: only GPU ranks capture CUDA graphs"),
            std::string::npos)
      << error_of(cpu);
  for (auto bad : {"2:1", "1:0", "x:1", "1", "1:2:3", "-1:1"}) {
    f.debug_fail_capture = bad;
    auto r = resolve_tp_flags(f, device_kind::cuda, 2);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(error_of(r).find(std::string{"--debug-fail-capture: '"} + bad
                               + "' is not RANK:N (a rank in [0, 2) and a capture number"),
              std::string::npos)
        << error_of(r);
  }
}

} // namespace
} // namespace kvactor
