// Behaviours no shipped config has: Gemma-3n KV sharing and LongCat's two attention modules.
// Their configs in tests/data are synthetic (see their "_comment").
#include "tests/model/model_test_support.hpp"

namespace kvactor {
namespace {

constexpr std::string_view gemma3n_file = "synthetic-gemma3n-kv-sharing.json";
constexpr std::string_view longcat_file = "synthetic-longcat-flash-dual-attention.json";

TEST(ModelLoaderSynthetic, Gemma3nSharedLayersReuseTheLastOwnLayerOfTheirType) {
  auto m = test::load_rank0(test::data_path(gemma3n_file));
  EXPECT_EQ(m.model_type, "gemma3n");
  ASSERT_EQ(m.layers.size(), 8u);
  // layer_types: s s s f | s s s f, the last 3 shared.
  EXPECT_EQ(test::indices_of(m, layer_kind::full), (std::vector<int32_t>{3, 7}));
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(m.layers[static_cast<size_t>(i)].kv_sharing_target.empty());
  EXPECT_EQ(m.layers[5].kv_sharing_target, "model.layers.4.self_attn.attn");
  EXPECT_EQ(m.layers[6].kv_sharing_target, "model.layers.4.self_attn.attn");
  EXPECT_EQ(m.layers[7].kv_sharing_target, "model.layers.3.self_attn.attn");
  EXPECT_EQ(m.layers[5].sliding_window, 512);
  test::expect_heads(m, 8, 2, 256);
}

TEST(ModelLoaderSynthetic, Gemma3nSharedLayerWithoutAnEarlierLayerOfItsTypeIsRejected) {
  auto config = nlohmann::json::parse(test::read_text(test::data_path(gemma3n_file)));
  config["text_config"]["num_kv_shared_layers"] = 5; // layer 3 (full) has only sliding before it
  auto r = load_model_layout(config.dump(), {}, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::invalid_argument);
  EXPECT_NE(r.err().message.find("num_kv_shared_layers: 5"), std::string::npos) << r.err().message;
  config["text_config"]["num_kv_shared_layers"] = 8;
  EXPECT_FALSE(load_model_layout(config.dump(), {}, 0));
}

TEST(ModelLoaderSynthetic, LongcatHasTwoMlaModulesPerLayer) {
  auto m = test::load_rank0(test::data_path(longcat_file));
  EXPECT_EQ(m.model_type, "longcat_flash");
  EXPECT_EQ(m.num_attn_modules, 2);
  ASSERT_EQ(m.layers.size(), 8u);
  EXPECT_EQ(m.layers[0].name, "model.layers.0.self_attn.0.attn");
  EXPECT_EQ(m.layers[1].name, "model.layers.0.self_attn.1.attn");
  EXPECT_EQ(m.layers[7].name, "model.layers.3.self_attn.1.attn");
  for (size_t k = 0; k < m.layers.size(); ++k) {
    const auto& l = m.layers[k];
    EXPECT_EQ(l.index, static_cast<int32_t>(k / 2));
    EXPECT_EQ(l.kind, layer_kind::mla);
    EXPECT_EQ(l.num_heads, 64);
    EXPECT_EQ(l.num_kv_heads, 1);
    EXPECT_EQ(l.head_size, 576);
    EXPECT_EQ(l.head_size_v, 0);
  }
}

TEST(ModelLoaderSynthetic, LongcatAcceptsNumHiddenLayersAndSplitsHeads) {
  auto config = nlohmann::json::parse(test::read_text(test::data_path(longcat_file)));
  config.erase("num_layers");
  config["num_hidden_layers"] = 3;
  load_options opt;
  opt.tensor_parallel_size = 2;
  auto m = test::layout_of(config, opt, 1);
  EXPECT_EQ(m.rank, 1);
  ASSERT_EQ(m.layers.size(), 6u);
  EXPECT_EQ(m.layers[0].num_heads, 32);
  config.erase("num_hidden_layers");
  auto r = load_model_layout(config.dump(), {}, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::missing_field);
  EXPECT_NE(r.err().message.find("num_layers: missing"), std::string::npos) << r.err().message;
}

} // namespace
} // namespace kvactor
