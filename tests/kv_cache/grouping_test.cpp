// Grouping of hybrid models (docs/vllm-semantics.md §3.4): page unification, group size, strided
// membership, padding.
#include <gtest/gtest.h>

#include "actors/kv_cache/grouping.hpp"
#include "helpers.hpp"

using namespace kvactor;
using namespace kvactor::test;

namespace {

layer_spec_list pattern(int n, const std::function<bool(int)>& is_full, int32_t window) {
  layer_spec_list out;
  for (int i = 0; i < n; ++i)
    out.push_back({"model.layers." + std::to_string(i),
                   is_full(i) ? full_attention_spec(16, 16, 128, dtype::bfloat16)
                              : sliding_window_spec(16, 16, 128, dtype::bfloat16, window)});
  return out;
}

} // namespace

TEST(KvGrouping, Gemma3FiftyTwoSlidingAndTenFullMakeSevenGroupsOfTen) {
  auto specs = pattern(
      62, [](int i) { return (i + 1) % 6 == 0; }, 1024);
  auto r = kv_cache_groups(specs);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->groups.size(), 7u);
  EXPECT_EQ(r->groups[0].spec.kind, kv_cache_spec_kind::sliding_window);
  // 52 sliding layers over ceil(52/10) = 6 groups, strided: 9,9,9,9,8,8 layers.
  std::vector<size_t> sizes;
  for (const auto& g : r->groups)
    sizes.push_back(g.layer_names.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{9, 9, 9, 9, 8, 8, 10}));
  EXPECT_EQ(r->groups[0].layer_names[0], "model.layers.0");
  EXPECT_EQ(r->groups[0].layer_names[1], "model.layers.7"); // sliding index 6
  EXPECT_EQ(r->groups[6].spec.kind, kv_cache_spec_kind::full);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0], "Add 8 padding layers, may waste at most 15.38% KV cache memory");
}

TEST(KvGrouping, GptOssTwelveAndTwelveMakeTwoGroups) {
  auto specs = pattern(
      24, [](int i) { return i % 2 == 1; }, 128);
  auto r = kv_cache_groups(specs);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->groups.size(), 2u);
  EXPECT_EQ(r->groups[0].spec.kind, kv_cache_spec_kind::sliding_window);
  EXPECT_EQ(r->groups[0].spec.sliding_window, 128);
  EXPECT_EQ(r->groups[1].spec.kind, kv_cache_spec_kind::full);
  EXPECT_EQ(r->groups[1].layer_names.size(), 12u);
  EXPECT_TRUE(r->warnings.empty());
}

TEST(KvGrouping, CloseBucketSizesUseTheLargerGroupSize) {
  // 12 sliding + 13 full: 13 < 1.5 x 12, so groups of 13 (one padding layer) instead of 12.
  auto specs = pattern(
      25, [](int i) { return i % 2 == 0; }, 128);
  auto r = kv_cache_groups(specs);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->groups.size(), 2u);
  EXPECT_EQ(r->warnings.size(), 1u);
}

TEST(KvGrouping, SmallerAttentionPageGrowsItsBlockSizeWhenItDivides) {
  layer_spec_list specs{{"a", full_attention_spec(16, 8, 128, dtype::bfloat16)},
                        {"b", sliding_window_spec(16, 4, 128, dtype::bfloat16, 64)}};
  auto r = unify_page_sizes(specs);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[1].spec.block_size, 32);
  EXPECT_EQ(page_size_bytes((*r)[1].spec), page_size_bytes((*r)[0].spec));
}

TEST(KvGrouping, IndivisibleAttentionPageIsPadded) {
  layer_spec_list specs{{"a", full_attention_spec(16, 3, 128, dtype::bfloat16)},
                        {"b", sliding_window_spec(16, 2, 128, dtype::bfloat16, 64)}};
  auto r = unify_page_sizes(specs);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[1].spec.block_size, 16);
  EXPECT_EQ((*r)[1].spec.page_size_padded, page_size_bytes((*r)[0].spec));
}

TEST(KvGrouping, IndivisibleMlaPageIsUnsupported) {
  layer_spec_list specs{{"a", full_attention_spec(16, 3, 128, dtype::bfloat16)},
                        {"b", mla_spec(16, 576, dtype::bfloat16)}};
  auto r = unify_page_sizes(specs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::unsupported);
  EXPECT_NE(r.err().message.find("b"), std::string::npos);
}

TEST(KvGrouping, DisabledHybridManagerRejectsKindsThatCannotMerge) {
  layer_spec_list specs{{"a", full_attention_spec(16, 8, 128, dtype::bfloat16)},
                        {"b", cross_attention_spec(16, 8, 128, dtype::bfloat16)}};
  grouping_options opt;
  opt.disable_hybrid = true;
  auto r = kv_cache_groups(specs, opt);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::incompatible_specs);
}

TEST(KvGrouping, AttentionAndStateLayersShareOnePoolAfterBlockAlignment) {
  // Jamba-shaped: 1 attention layer per 8, Mamba-1 state (8192 x 3 + 8192 x 16) bf16.
  std::vector<attention_layer> model;
  for (int i = 0; i < 16; ++i) {
    attention_layer l;
    l.name = "model.layers." + std::to_string(i);
    l.index = i;
    if (i % 8 == 4) {
      l.kind = layer_kind::full;
      l.num_heads = 32;
      l.num_kv_heads = 8;
      l.head_size = l.head_size_v = 128;
    } else {
      l.kind = layer_kind::mamba;
      l.state_shapes = {{8192, 3}, {8192, 16}};
      l.state_dtypes = {dtype::bfloat16, dtype::bfloat16};
    }
    model.push_back(l);
  }
  auto specs = kv_cache_specs(model, {16, 8192});
  // 311,296-byte state / 4,096 bytes per attention token = 76 tokens -> 80 (multiple of 16).
  EXPECT_EQ(specs[4].spec.block_size, 80);
  EXPECT_EQ(page_size_bytes(specs[0].spec), 80 * 4096);
  auto r = kv_cache_groups(specs);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->groups.size(), 8u); // 2 attention layers -> 1 group; 14 state layers -> 7
  EXPECT_EQ(r->groups[0].spec.kind, kv_cache_spec_kind::mamba);
}

TEST(KvGrouping, KvSharingLayersJoinTheirTargetsGroup) {
  std::vector<kv_cache_group> groups{{{"t0"}, full()}, {{"t1"}, full()}};
  auto out = add_kv_sharing_layers(groups, {{"t3", "t1"}});
  ASSERT_TRUE(out);
  EXPECT_EQ(out->at(1).layer_names, (std::vector<std::string>{"t1", "t3"}));
  auto missing = add_kv_sharing_layers(groups, {{"t3", "missing"}});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.err().code, errc::invalid_argument);
  EXPECT_NE(missing.err().message.find("kv_sharing_target of t3: missing"), std::string::npos)
      << missing.err().message;
}
