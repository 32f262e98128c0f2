// docs/vllm-semantics.md §2.6: physical layouts and per-layer views.
#include <gtest/gtest.h>

#include "actors/kv_cache/layout.hpp"
#include "actors/kv_cache/planner.hpp"

using namespace kvactor;

namespace {

kv_cache_tensor tensor_for(const kv_cache_spec& spec, int64_t nb, kv_cache_layout layout) {
  kv_plan_options opt;
  opt.layout = layout;
  auto cfg =
      kv_cache_config_from_groups({{{"l0", "l1"}, spec}}, 2 * nb * page_size_bytes(spec), opt);
  return cfg.tensors.at(0);
}

} // namespace

TEST(KvLayout, LlamaLayerViewUnderLbhnc) {
  auto spec = full_attention_spec(16, 8, 128, dtype::bfloat16);
  auto t = tensor_for(spec, 100, kv_cache_layout::lbhnc);
  auto v = layer_view(t, "l1", spec, 100, kv_cache_layout::lbhnc);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->shape, (std::vector<int64_t>{100, 8, 16, 256}));
  EXPECT_EQ(v->strides, (std::vector<int64_t>{32768, 4096, 256, 1}));
  EXPECT_EQ(v->offset_bytes, 100 * 65536);
}

TEST(KvLayout, LlamaLayerViewUnderLbnhcIsTokenMajor) {
  auto spec = full_attention_spec(16, 8, 128, dtype::bfloat16);
  auto t = tensor_for(spec, 100, kv_cache_layout::lbnhc);
  auto v = layer_view(t, "l0", spec, 100, kv_cache_layout::lbnhc);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->strides, (std::vector<int64_t>{32768, 256, 2048, 1}));
}

TEST(KvLayout, PaddedPageSetsTheBlockStride) {
  auto spec = full_attention_spec(16, 1, 2, dtype::float32);
  spec.page_size_padded = 384;
  auto t = tensor_for(spec, 3, kv_cache_layout::lbhnc);
  auto v = layer_view(t, "l0", spec, 3, kv_cache_layout::lbhnc);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->shape, (std::vector<int64_t>{3, 1, 16, 4}));
  EXPECT_EQ(v->strides[0], 96); // block 1 starts at element 96
  EXPECT_EQ(v->strides[2], 4);  // each block's content is contiguous
}

TEST(KvLayout, LayerOuterHeadOuterStridesWithFixedBlockStride) {
  const int64_t nb = 10;
  const int64_t natural = 16 * 256;
  auto s = layout_strides(kv_cache_layout::lhbnc, {4, nb, 8, 16, 256}, {0, natural + 8, 0, 0, 0});
  EXPECT_EQ(s[dim_b], natural + 8);
  EXPECT_EQ(s[dim_h], (natural + 8) * nb);
  EXPECT_EQ(s[dim_l], (natural + 8) * nb * 8);
}

TEST(KvLayout, KernelBlocksSplitADenseManagerBlock) {
  auto spec = full_attention_spec(64, 8, 128, dtype::bfloat16);
  auto t = tensor_for(spec, 10, kv_cache_layout::lbhnc);
  auto v = layer_view(t, "l0", spec, 10, kv_cache_layout::lbhnc, 16);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->shape, (std::vector<int64_t>{40, 8, 16, 256}));
  EXPECT_EQ(v->strides[0], 8 * 16 * 256);
}

TEST(KvLayout, PaddedBlocksCannotBeSplit) {
  auto spec = full_attention_spec(64, 8, 128, dtype::bfloat16);
  spec.page_size_padded = page_size_bytes(spec) + 512;
  auto t = tensor_for(spec, 10, kv_cache_layout::lbhnc);
  auto v = layer_view(t, "l0", spec, 10, kv_cache_layout::lbhnc, 16);
  ASSERT_FALSE(v);
  EXPECT_NE(v.err().message.find("--block-size"), std::string::npos);
}

TEST(KvLayout, BlockOutermostLayoutStridesBlocksByBytesPerBlock) {
  auto spec = full_attention_spec(16, 8, 128, dtype::bfloat16);
  auto t = tensor_for(spec, 10, kv_cache_layout::blhnc);
  EXPECT_EQ(t.block_stride, 2 * 65536);
  EXPECT_EQ(t.layer_stride, 65536);
}

TEST(KvLayout, UnknownLayerIsAnError) {
  auto spec = full_attention_spec(16, 8, 128, dtype::bfloat16);
  auto t = tensor_for(spec, 10, kv_cache_layout::lbhnc);
  EXPECT_FALSE(layer_view(t, "nope", spec, 10, kv_cache_layout::lbhnc));
}

TEST(KvLayout, CompressedMlaKeepsOneStatePerFourTokens) {
  auto spec = mla_spec(256, 128, dtype::bfloat16);
  spec.tokens_per_state = 4;
  EXPECT_EQ(page_size_bytes(spec), 64 * 128 * 2);
  auto t = tensor_for(spec, 4, kv_cache_layout::lbhnc);
  for (int32_t kbs : {0, 256}) {
    auto v = layer_view(t, "l0", spec, 4, kv_cache_layout::lbhnc, kbs);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->shape, (std::vector<int64_t>{4, 1, 64, 128}));
  }
  auto split = layer_view(t, "l0", spec, 4, kv_cache_layout::lbhnc, 64);
  ASSERT_TRUE(split);
  EXPECT_EQ(split->shape, (std::vector<int64_t>{16, 1, 16, 128}));
}
