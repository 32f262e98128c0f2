// paged_attention_cuda vs the CPU reference (paged_attention) on random bf16/f16 data: decode
// (GQA, MQA, split-KV), mixed batches of decodes and prefill chunks, every attention feature, MLA.
#include <gtest/gtest.h>

#include "attention_harness.hpp"
#include "gpu_support.hpp"

namespace kvactor::kernels::gpu_test {
namespace {

constexpr double tolerance = 1e-2; // relative L2, bf16/f16 inputs, float accumulation

// A mixed step: decodes with short and long contexts, a fresh prefill, prefill chunks after a
// cached prefix, multi-token rows small enough for the decode kernel (3 x group 4 = 12 rows),
// and an idle request.
const std::vector<std::pair<int32_t, int32_t>> mixed_reqs{
    {900, 1}, {0, 130}, {37, 1}, {250, 200}, {5, 3}, {64, 64}, {0, 1}, {16, 0}, {1200, 77}};

TEST(PagedAttentionCuda, DecodeGqaMatchesReferenceBf16) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c; // 32 q / 8 kv heads, head 128, block 16
  c.reqs = {{0, 1},    {14, 1},   {15, 1}, {16, 1},  {100, 1}, {511, 1},
            {1000, 1}, {1999, 1}, {47, 1}, {300, 1}, {767, 1}, {1500, 1}};
  c.padding = 4;
  expect_matches(c);
}

TEST(PagedAttentionCuda, DecodeGqaMatchesReferenceFp16) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.type = element_type::f16;
  c.reqs = {{3, 1}, {700, 1}, {129, 1}, {2047, 1}};
  expect_matches(c);
}

TEST(PagedAttentionCuda, DecodeMqaSplitsThe32HeadGroupAcrossCtas) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.hq = 32;
  c.hkv = 1;
  c.type = element_type::f16;
  c.reqs = {{0, 1}, {90, 1}, {333, 1}, {1024, 1}, {17, 2}};
  expect_matches(c);
}

// A bound on the query lengths that makes every request a decode skips the prefill launch; the
// decode kernel alone then writes every row (an unwritten row would stay NaN).
TEST(PagedAttentionCuda, DecodeOnlyBatchesWithAMaxQueryLenSkipThePrefillLaunch) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.reqs = {{0, 1}, {700, 1}, {129, 1}, {2047, 1}};
  c.padding = 2;
  c.max_query_len = 1;
  expect_matches(c);
  c.reqs = {{5, 3}, {300, 2}, {0, 1}, {64, 3}}; // 3 tokens x group 4 = 12 rows: decode kernel
  c.max_query_len = 3;
  expect_matches(c);
}

TEST(PagedAttentionCuda, MixedBatchOfDecodesAndPrefillChunksMatchesReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.reqs = mixed_reqs;
  c.padding = 7;
  expect_matches(c);
}

TEST(PagedAttentionCuda, MixedBatchInBnhcLayoutMatchesReferenceFp16) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.type = element_type::f16;
  c.bnhc = true;
  c.hq = 16;
  c.hkv = 4;
  c.reqs = mixed_reqs;
  expect_matches(c);
}

TEST(PagedAttentionCuda, SlidingWindowHidesOldKeysAndReleasedBlocks) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.window = 100;
  c.reqs = mixed_reqs;
  c.padding = 2;
  expect_matches(c);
}

TEST(PagedAttentionCuda, ChunkedLocalAttendsWithinChunk) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.chunk = 128;
  c.reqs = mixed_reqs;
  expect_matches(c);
}

TEST(PagedAttentionCuda, SoftcapBoundsScores) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.softcap = 2.0f;
  c.q_range = 6.0f; // scores well past the cap
  c.reqs = mixed_reqs;
  expect_matches(c);
}

TEST(PagedAttentionCuda, SinksJoinTheDenominator) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.sinks = true;
  c.reqs = mixed_reqs;
  expect_matches(c);
}

TEST(PagedAttentionCuda, AllFeaturesTogetherMatchReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.hq = 24;
  c.hkv = 4; // group 6: 2 tokens x 6 = 12 decode rows
  c.window = 300;
  c.softcap = 5.0f;
  c.sinks = true;
  c.block_size = 32;
  c.reqs = {{2000, 1}, {600, 2}, {10, 150}, {400, 9}};
  expect_matches(c);
}

TEST(PagedAttentionCuda, NonCausalSeesTheWholeSequence) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.causal = false;
  c.reqs = {{0, 70}, {0, 1}, {0, 150}, {0, 3}};
  expect_matches(c);
  c.window = 20; // symmetric window
  expect_matches(c);
}

TEST(PagedAttentionCuda, SplitKvBatchOneLongContextMatchesReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.reqs = {{8191, 1}};
  const attention_outcome r = run_attention_case(c);
  EXPECT_GT(r.workspace_bytes, 0u) << "batch 1 x 8192 should split its keys";
  EXPECT_EQ(r.nan_values, 0);
  EXPECT_LE(r.rel_l2, tolerance);
}

TEST(PagedAttentionCuda, SplitKvMergeAddsSinksAndSkipsEmptySplits) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.sinks = true;
  c.softcap = 10.0f;
  // Short requests beside a long one: most of their splits have no keys.
  c.reqs = {{5000, 1}, {3, 1}, {200, 1}, {40, 4}};
  const attention_outcome r = run_attention_case(c);
  EXPECT_GT(r.workspace_bytes, 0u);
  EXPECT_EQ(r.nan_values, 0);
  EXPECT_LE(r.rel_l2, tolerance);
}

// Every decode grid gives the reference's result: the planned splits or fixed ones (1, 3, 28, the
// maximum) at heads 64, 96 and 128, a request long enough that a warp of a single split refreshes
// its block ids (> 32 sub-tiles), a window and sinks; and fixed splits without a workspace (then
// none).
TEST(PagedAttentionCuda, EveryDecodeGridMatchesReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  for (const element_type type : {element_type::bf16, element_type::f16})
    for (const int32_t d : {64, 96, 128})
      for (const int32_t splits : {0, 1, 3, 28, 64}) {
        attention_case c;
        c.type = type;
        c.d = d;
        c.reqs = {{8191, 1}, {100, 1}, {17, 2}};
        c.sinks = splits == 3;
        c.window = splits == 28 ? 700 : 0;
        c.decode = decode_shape{splits};
        SCOPED_TRACE(::testing::Message()
                     << to_string(type) << ", head " << d << ", splits " << splits);
        const attention_outcome r = run_attention_case(c);
        EXPECT_EQ(r.nan_values, 0);
        EXPECT_EQ(r.repeat_differs, 0);
        EXPECT_LE(r.rel_l2, tolerance);
        // The splits took effect: partial results sized for the splits asked (beyond the 16 KiB
        // of counters), none for one split.
        if (splits > 1) {
          EXPECT_GT(r.workspace_bytes, 16384u);
        } else if (splits == 1) {
          EXPECT_LE(r.workspace_bytes, 16384u);
        }
      }
  attention_case c;
  c.reqs = {{8191, 1}};
  c.decode = decode_shape{64};
  c.workspace = false; // 64 splits asked, none possible
  expect_matches(c);
}

// Fixed splits that the workspace holds only in part: the launcher runs as many as fit (five
// here), and the result is still the reference's.
TEST(PagedAttentionCuda, FixedSplitsBeyondTheWorkspaceRunAsManyAsFit) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.reqs = {{8191, 1}, {100, 1}};
  c.sinks = true;
  const auto bytes_for = [&](int32_t splits) {
    c.decode = decode_shape{splits};
    return run_attention_case(c).workspace_bytes;
  };
  const size_t two = bytes_for(2), sixty_four = bytes_for(64);
  ASSERT_GT(sixty_four, two);
  const size_t per_split = (sixty_four - two) / 62;
  c.decode = decode_shape{64};
  c.workspace_cap = two + 3 * per_split + per_split / 2; // room for 5 splits, not 6
  expect_matches(c);
}

TEST(PagedAttentionCuda, WithoutWorkspaceNothingIsSplitAndResultsStillMatch) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.reqs = {{6000, 1}};
  c.workspace = false;
  expect_matches(c);
}

// FP8 E4M3 caches (vLLM's --kv-cache-dtype fp8): the kernels dequantise in shared memory, the
// reference reads code x scale; both see the same values, so the bf16 tolerance holds.
TEST(PagedAttentionCuda, Fp8DecodeGqaWithSplitsMatchesReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.type = element_type::fp8_e4m3;
  c.k_scale = 0.01f; // K and V of [-1, 1) over the scales: codes up to 100 and 250
  c.v_scale = 0.004f;
  c.reqs = {{0, 1}, {15, 1}, {16, 1}, {511, 1}, {1999, 1}, {4095, 1}, {47, 1}, {767, 1}};
  c.padding = 3;
  expect_matches(c);
}

TEST(PagedAttentionCuda, Fp8BatchOneLongContextSplitsAndMerges) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.type = element_type::fp8_e4m3;
  c.reqs = {{8191, 1}};
  const attention_outcome r = run_attention_case(c);
  EXPECT_GT(r.workspace_bytes, 0u) << "one long request is split across CTAs";
  EXPECT_EQ(r.nan_values, 0);
  EXPECT_LE(r.rel_l2, tolerance);
}

TEST(PagedAttentionCuda, Fp8MixedBatchOfDecodesAndPrefillChunksMatchesReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.type = element_type::fp8_e4m3;
  c.k_scale = 0.02f;
  c.v_scale = 0.05f;
  c.reqs = mixed_reqs;
  c.padding = 7;
  expect_matches(c);
}

TEST(PagedAttentionCuda, Fp8EveryHeadSizeAndFeatureInBnhcLayoutMatchesReference) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  for (int32_t d : {64, 96, 256}) {
    attention_case c;
    c.type = element_type::fp8_e4m3;
    c.d = d;
    c.hq = 8;
    c.hkv = 2;
    c.bnhc = true;
    c.block_size = 32;
    c.window = 300;
    c.softcap = 30.0f;
    c.sinks = true;
    c.reqs = {{700, 1}, {0, 150}, {333, 70}, {90, 3}};
    SCOPED_TRACE("head_size " + std::to_string(d));
    expect_matches(c);
  }
}

TEST(PagedAttentionCuda, MlaDecodeMatchesReferenceBf16) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.mla = true;
  c.hq = 16;
  c.hkv = 1;
  c.reqs = {{0, 1}, {77, 1}, {500, 1}, {1300, 1}, {31, 1}};
  c.padding = 3;
  expect_matches(c);
}

TEST(PagedAttentionCuda, MlaSplitsLongContextAndRunsPrefillTokensFp16) {
  KVACTOR_REQUIRE_CUDA_DEVICE();
  attention_case c;
  c.mla = true;
  c.type = element_type::f16;
  c.hq = 128; // 8 CTAs of 16 heads per token
  c.hkv = 1;
  c.block_size = 64;
  c.sinks = true;
  c.reqs = {{4000, 1}};
  const attention_outcome r = run_attention_case(c);
  EXPECT_GT(r.workspace_bytes, 0u);
  EXPECT_EQ(r.nan_values, 0);
  EXPECT_LE(r.rel_l2, tolerance);
  c.reqs = {{100, 1}, {20, 12}, {0, 5}};
  c.window = 50;
  expect_matches(c);
}

} // namespace
} // namespace kvactor::kernels::gpu_test
