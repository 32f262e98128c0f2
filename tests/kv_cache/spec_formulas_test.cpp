// docs/vllm-semantics.md §10 "Spec arithmetic" and "Merging / uniformity" cases, plus the §2.3
// memory formulas.
#include <gtest/gtest.h>

#include "helpers.hpp"

using namespace kvactor;
using namespace kvactor::test;

TEST(KvSpec, FullAttentionPageIsBlockTimesHeadsTimesKAndV) {
  EXPECT_EQ(page_size_bytes(full()), 16384);
}

TEST(KvSpec, Llama3LayerPageIs64KiBAndBlockIs2MiB) {
  auto s = full_attention_spec(16, 8, 128, dtype::bfloat16);
  EXPECT_EQ(page_size_bytes(s), 65536);
  EXPECT_EQ(32 * page_size_bytes(s), 2097152);
}

TEST(KvSpec, PaddedPageKeepsRealPage) {
  auto s = full_attention_spec(16, 1, 2, dtype::float32);
  s.page_size_padded = 384;
  EXPECT_EQ(real_page_size_bytes(s), 256);
  EXPECT_EQ(page_size_bytes(s), 384);
}

TEST(KvSpec, SlidingWindowNeedsWindowPlusInFlightPlusOneBlock) {
  auto s = sliding_window_spec(16, 32, 128, dtype::float16, 1024);
  auto lim = limits_of(16384, 1024);
  EXPECT_EQ(max_memory_usage_bytes(s, lim) / page_size_bytes(s), 129);
}

TEST(KvSpec, MlaPageHasNoKvDoubling) {
  EXPECT_EQ(page_size_bytes(mla_spec(64, 576, dtype::bfloat16)), 73728);
}

TEST(KvSpec, ChunkedLocalNeedsChunkPlusInFlight) {
  auto s = chunked_local_spec(16, 8, 128, dtype::bfloat16, 8192);
  EXPECT_EQ(max_memory_usage_bytes(s, limits_of(131072, 2048)), (8192 + 2048) / 16 * 65536);
  EXPECT_EQ(max_memory_usage_bytes(s, limits_of(4096, 2048)), 4096 / 16 * 65536);
}

TEST(KvSpec, CrossAttentionSizedByEncoderInput) {
  auto s = cross_attention_spec(16, 20, 64, dtype::float16);
  auto lim = limits_of(448);
  lim.max_encoder_input_tokens = 1500;
  EXPECT_EQ(max_memory_usage_bytes(s, lim), 94 * page_size_bytes(s));
}

TEST(KvSpec, EncoderOnlyNeedsNoMemory) {
  EXPECT_EQ(max_memory_usage_bytes(encoder_only_spec(16, 12, 64, dtype::bfloat16), limits_of(512)),
            0);
}

TEST(KvSpec, MambaPageSumsStatesAndModeSetsPagesPerRequest) {
  auto s = mamba_spec(8192, {{8192, 3}, {8192, 16}}, {dtype::bfloat16, dtype::bfloat16});
  EXPECT_EQ(page_size_bytes(s), (8192 * 3 + 8192 * 16) * 2);
  EXPECT_EQ(max_memory_usage_bytes(s, limits_of(8192)), page_size_bytes(s));
  s.cache_mode = mamba_cache_mode::align;
  EXPECT_EQ(max_memory_usage_bytes(s, limits_of(8192)), 2 * page_size_bytes(s));
  s.cache_mode = mamba_cache_mode::all;
  s.block_size = 16;
  EXPECT_EQ(max_memory_usage_bytes(s, limits_of(160)), 10 * page_size_bytes(s));
}

TEST(KvSpec, UniformTypePageSumsLayersAndMemoryTakesLongestLayer) {
  auto w = uniform_type_from_specs({"a", "b"}, {full(2, 128), full(2, 64)});
  ASSERT_TRUE(w);
  EXPECT_EQ(page_size_bytes(*w), 3 * p0);
  EXPECT_EQ(max_memory_usage_bytes(*w, limits_of(32)), 2 * 3 * p0);
}

TEST(KvSpecMerge, EqualSpecsMergeToTheFirst) {
  auto m = merge_specs({full(32), full(32)});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->block_size, 16);
  EXPECT_EQ(m->num_kv_heads, 32);
  EXPECT_EQ(m->head_size, 64);
  EXPECT_EQ(m->kv_dtype, dtype::float32);
  EXPECT_EQ(m->sliding_window, 0);
}

TEST(KvSpecMerge, DifferentHeadsOrKindsDoNotMerge) {
  EXPECT_EQ(merge_specs({full(32), full(16)}).err().code, errc::incompatible_specs);
  EXPECT_FALSE(merge_specs({full(), sw()}));
  EXPECT_FALSE(merge_specs({sw(), full()}));
}

TEST(KvSpecMerge, FullAttentionWindowsMustAgree) {
  auto bad = merge_specs({full(2, 64, 1), full(2, 64, 2), full()});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.err().message.find("sliding_window"), std::string::npos);
  auto good = merge_specs({full(2, 64, 1), full()});
  ASSERT_TRUE(good);
  EXPECT_EQ(good->sliding_window, 1);
}

TEST(KvSpecMerge, UniformityFollowsMergeability) {
  EXPECT_TRUE(is_uniform({full(), full(2, 64, 1)}));
  EXPECT_FALSE(is_uniform({full(), sw(1)}));
  EXPECT_TRUE(is_uniform({sw(1), sw(1)}));
  EXPECT_FALSE(is_uniform({sw(1), sw(2)}));
}

TEST(KvSpecMerge, UniformTypeWrapsSameFamilyWithOneBlockSize) {
  auto a = uniform_type_from_specs({"a", "b"}, {full(2, 64), full(2, 128)});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, kv_cache_spec_kind::uniform_type);
  EXPECT_EQ(a->block_size, 16);
  EXPECT_FALSE(uniform_type_from_specs({"a", "b"}, {full(), sw()}));
  EXPECT_TRUE(uniform_type_from_specs({"a", "b"}, {sw(1, 64), sw(1, 128)}));
  EXPECT_FALSE(uniform_type_from_specs({"a", "b"}, {full(2, 64, 0, 16), full(2, 64, 0, 32)}));
}
