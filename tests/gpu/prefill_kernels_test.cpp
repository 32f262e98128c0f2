// Both prefill kernels (mma.sync, and Hopper's wgmma where it applies, with its persistent
// schedule and with one CTA per tile) against the CPU reference on prefill-heavy batches: long
// fresh prompts, chunks after cached prefixes, partial last tiles, every head size they share and
// every attention feature.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "attention_harness.hpp"
#include "gpu_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

// Skips the calling test when the chosen kernel cannot serve the case here.
#define KVACTOR_REQUIRE_PREFILL_KERNEL(c)                                                          \
  do {                                                                                             \
    KVACTOR_REQUIRE_CUDA_DEVICE();                                                                 \
    if ((c).prefill != prefill_kernel::mma_sync && !hopper_serves(c))                              \
      GTEST_SKIP() << "the Hopper prefill kernel needs an sm_90a build and a compute capability "  \
                      "9.0 device";                                                                \
  } while (0)

// hopper_prefill_applies for the case's head size and cache type.
bool hopper_serves(const attention_case& c) {
  attention_params p;
  p.head_size = c.d;
  p.v_size = c.d;
  kv_view v;
  v.type = c.type;
  return hopper_prefill_applies(p, v);
}

// Fresh prompts of several tiles (partial last tile), chunks after cached prefixes that start
// inside a block, a chunk that is one tile exactly, a decode between them.
const std::vector<std::pair<int32_t, int32_t>> prefill_reqs{{0, 700}, {333, 129},  {0, 128},
                                                            {900, 1}, {1500, 300}, {5, 200}};

using kernel_and_size = std::tuple<prefill_kernel, int32_t>;

class PrefillKernels : public ::testing::TestWithParam<kernel_and_size> {
protected:
  attention_case base() const {
    attention_case c;
    std::tie(c.prefill, c.d) = GetParam();
    c.hq = 8;
    c.hkv = 2;
    c.reqs = prefill_reqs;
    c.padding = 5;
    c.seed = static_cast<uint32_t>(c.d + 7 * static_cast<int>(c.prefill));
    return c;
  }
};

TEST_P(PrefillKernels, CausalPrefillMatchesReferenceBf16) {
  attention_case c = base();
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, CausalPrefillMatchesReferenceFp16InBnhcLayout) {
  attention_case c = base();
  c.type = element_type::f16;
  c.bnhc = true;
  c.block_size = 32;
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, NonCausalSeesEveryKey) {
  attention_case c = base();
  c.causal = false;
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, SlidingWindowSkipsTilesAndReleasedBlocks) {
  attention_case c = base();
  c.window = 200; // narrower than a tile's reach: whole tiles skipped, edges masked
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, ChunkedLocalStaysInsideItsChunk) {
  attention_case c = base();
  c.chunk = 192;
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, SoftcapSinksAndGqaGroupOfSixTogether) {
  attention_case c = base();
  c.hq = 12;
  c.hkv = 2;
  c.softcap = 5.0f;
  c.q_range = 6.0f;
  c.sinks = true;
  c.window = 400;
  c.block_size = 64;
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, WideScoreRangeMovesTheRunningMaxPastTheLazyThreshold) {
  attention_case c = base();
  // Scores with a spread of ~20 log2 units: new keys often pass the running max by more than the
  // lazy softmax's 2^8 (the max moves, O is rescaled) and often by less (both are kept).
  c.q_range = 40.0f;
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, RunsOfDecodesBetweenPrefillsLeaveNoTileUndone) {
  attention_case c = base();
  // Slots without a tile, one after another (the persistent schedule jumps over them), between
  // and around prefills; more tiles than the GPU runs at once.
  c.reqs.clear();
  for (int i = 0; i < 40; ++i)
    c.reqs.push_back({100 + i, 1});
  c.reqs.push_back({0, 1000});
  for (int i = 0; i < 25; ++i)
    c.reqs.push_back({7 * i, 1});
  c.reqs.push_back({250, 513});
  c.reqs.push_back({0, 4});
  c.hq = 16;
  c.hkv = 4;
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

TEST_P(PrefillKernels, WithoutAWorkspaceEveryTileStillRuns) {
  attention_case c = base();
  c.workspace = false; // the Hopper kernel then runs one CTA per tile
  KVACTOR_REQUIRE_PREFILL_KERNEL(c);
  expect_matches(c);
}

std::string kernel_name(const ::testing::TestParamInfo<kernel_and_size>& info) {
  const auto [kernel, d] = info.param;
  const char* const name = kernel == prefill_kernel::hopper            ? "hopper"
                           : kernel == prefill_kernel::hopper_per_tile ? "hopper_per_tile"
                                                                       : "mma_sync";
  return std::string(name) + "_d" + std::to_string(d);
}

INSTANTIATE_TEST_SUITE_P(EveryKernel, PrefillKernels,
                         ::testing::Combine(::testing::Values(prefill_kernel::mma_sync,
                                                              prefill_kernel::hopper,
                                                              prefill_kernel::hopper_per_tile),
                                            ::testing::Values(64, 128, 256)),
                         kernel_name);

TEST(PrefillKernelChoice, AskingForHopperWhereItDoesNotApplyIsAnErrorNamingTheCase) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.d = 96; // the Hopper kernel has no head size 96
  c.reqs = {{0, 300}};
  c.prefill = prefill_kernel::hopper;
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    (void)run_attention_case(c);
  }
  ASSERT_GE(failures.size(), 1);
  const std::string message = failures.GetTestPartResult(0).message();
  EXPECT_NE(message.find("prefill: the Hopper kernel does not serve head_size 96"),
            std::string::npos)
      << message;
}

} // namespace
} // namespace kvactor::kernels::gpu_test
