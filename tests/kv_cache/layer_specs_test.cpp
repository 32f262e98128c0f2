// docs/vllm-semantics.md §1.3–1.5: which layers own a cache, KV sharing, fast-prefill eligibility.
#include <gtest/gtest.h>

#include "actors/kv_cache/layer_specs.hpp"

using namespace kvactor;

namespace {

std::vector<attention_layer> model(const std::vector<std::string>& names,
                                   const std::map<std::string, std::string>& sharing) {
  std::vector<attention_layer> out;
  for (const auto& n : names) {
    attention_layer l;
    l.name = n;
    l.num_heads = l.num_kv_heads = 2;
    l.head_size = l.head_size_v = 64;
    if (auto it = sharing.find(n); it != sharing.end()) l.kv_sharing_target = it->second;
    out.push_back(l);
  }
  return out;
}

} // namespace

TEST(LayerSpecs, SharingAndEncoderOnlyLayersOwnNoCache) {
  auto layers = model({"t0", "t1", "t2"}, {{"t2", "t0"}});
  layers[1].kind = layer_kind::encoder_only;
  auto specs = kv_cache_specs(layers, {16, 128});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].layer, "t0");
  EXPECT_EQ(shared_kv_cache_layers(layers), (std::map<std::string, std::string>{{"t2", "t0"}}));
  EXPECT_EQ(encoder_only_specs(layers, {16, 128}).size(), 1u);
}

TEST(FastPrefill, NoSharingMeansNoEligibleLayers) {
  EXPECT_TRUE(fast_prefill_eligible_layers(model({"t0", "t1"}, {}), true).empty());
}

TEST(FastPrefill, TrailingRunOfSharingLayersIsEligible) {
  auto names = std::vector<std::string>{"t0", "t1", "t2", "t3"};
  EXPECT_EQ(fast_prefill_eligible_layers(model(names, {{"t2", "t0"}, {"t3", "t1"}}), true),
            (std::set<std::string>{"t2", "t3"}));
  EXPECT_EQ(fast_prefill_eligible_layers(model(names, {{"t1", "t0"}, {"t3", "t0"}}), true),
            (std::set<std::string>{"t3"}));
  EXPECT_TRUE(fast_prefill_eligible_layers(model(names, {{"t2", "t0"}}), false).empty());
}

TEST(FastPrefill, DraftLayersNeitherExtendNorBreakTheRun) {
  auto names = std::vector<std::string>{"t0", "t1", "t2", "t3", "d0", "d1"};
  auto layers = model(names, {{"t2", "t0"}, {"t3", "t1"}, {"d0", "t0"}, {"d1", "t1"}});
  EXPECT_EQ(fast_prefill_eligible_layers(layers, true),
            (std::set<std::string>{"t2", "t3", "d0", "d1"}));
  EXPECT_EQ(fast_prefill_eligible_layers(layers, true, {"d0", "d1"}),
            (std::set<std::string>{"t2", "t3"}));
}
