// paged_attention_cuda on a mixed batch for every supported (element type, head size, block
// size), against the CPU reference.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "attention_harness.hpp"
#include "gpu_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

using shape = std::tuple<element_type, int32_t, int32_t>; // type, head size, block size

class PagedAttentionCudaShapes : public ::testing::TestWithParam<shape> {};

TEST_P(PagedAttentionCudaShapes, MixedBatchMatchesReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  std::tie(c.type, c.d, c.block_size) = GetParam();
  c.hq = 8;
  c.hkv = 2;
  c.seed = static_cast<uint32_t>(c.d * 100 + c.block_size);
  // Decodes, a multi-token decode (4 x group 4 = 16 rows), prefill chunks after cached prefixes
  // (partial last tiles, block-straddling starts), a fresh prefill.
  c.reqs = {{333, 1}, {0, 1}, {60, 4}, {95, 70}, {1, 129}, {0, 64}, {1000, 1}, {513, 17}};
  c.padding = 3;
  const attention_outcome r = run_attention_case(c);
  EXPECT_EQ(r.nan_values, 0);
  EXPECT_EQ(r.padding_overwritten, 0);
  EXPECT_LE(r.rel_l2, 1e-2);
}

std::string shape_name(const ::testing::TestParamInfo<shape>& info) {
  const auto [type, d, bs] = info.param;
  return std::string(to_string(type)) + "_d" + std::to_string(d) + "_bs" + std::to_string(bs);
}

INSTANTIATE_TEST_SUITE_P(
    AllSupported, PagedAttentionCudaShapes,
    ::testing::Combine(::testing::Values(element_type::bf16, element_type::f16),
                       ::testing::Values(64, 96, 128, 256), ::testing::Values(16, 32, 64)),
    shape_name);

} // namespace
} // namespace kvactor::kernels::gpu_test
