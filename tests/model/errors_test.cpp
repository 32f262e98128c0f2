// Bad configs come back as errors that name the field and the value; nothing throws.
#include "tests/model/model_test_support.hpp"

namespace kvactor {
namespace {

/// Loads `text` at TP 1 and expects it to fail with `code` and a message containing `part`.
void expect_error(const std::string& text, errc code, std::string_view part) {
  auto r = load_model_layout(text, {}, 0);
  ASSERT_FALSE(r) << "loaded: " << text;
  EXPECT_EQ(r.err().code, code) << to_string(r.err().code) << ": " << r.err().message;
  EXPECT_NE(r.err().message.find(part), std::string::npos) << r.err().message;
}

TEST(ModelLoaderErrors, MalformedJsonIsAParseError) {
  expect_error(R"({"model_type": "llama",)", errc::parse_error, "parse error");
  expect_error("", errc::parse_error, "config: not valid JSON");
}

TEST(ModelLoaderErrors, ANumberBeyondDoubleIsAParseErrorNotACrash) {
  // nlohmann::json throws out_of_range, not parse_error, for it (found by the config fuzzer's
  // sibling, tests/fuzz/corpus/config/regression-number-overflow.json).
  expect_error(R"({"model_type": "llama", "hidden_size": 1e99999})", errc::parse_error,
               "number overflow");
}

TEST(ModelLoaderErrors, TopLevelThatIsNotAnObjectIsAParseError) {
  expect_error("[1, 2]", errc::parse_error, "array");
  expect_error("42", errc::parse_error, "expected an object");
}

TEST(ModelLoaderErrors, UnknownModelTypeListsTheSupportedOnes) {
  auto config = test::tiny_llama();
  config["model_type"] = "mamba2";
  expect_error(config.dump(), errc::unknown_model_type, "model_type: unknown value 'mamba2'");
  expect_error(config.dump(), errc::unknown_model_type, "qwen3_next");
}

TEST(ModelLoaderErrors, MissingModelTypeIsAMissingField) {
  auto config = test::tiny_llama();
  config.erase("model_type");
  expect_error(config.dump(), errc::missing_field, "model_type: missing");
  config["model_type"] = 7;
  expect_error(config.dump(), errc::invalid_argument, "model_type: 7");
}

TEST(ModelLoaderErrors, MissingNumHiddenLayersIsAMissingField) {
  auto config = test::tiny_llama();
  config.erase("num_hidden_layers");
  expect_error(config.dump(), errc::missing_field,
               "num_hidden_layers: missing from config (model_type llama)");
  config["num_hidden_layers"] = nullptr; // null counts as missing
  expect_error(config.dump(), errc::missing_field, "num_hidden_layers: missing");
}

TEST(ModelLoaderErrors, MissingTextConfigFieldNamesTextConfig) {
  auto config = test::shipped_json("gemma-3-27b-it");
  config["text_config"].erase("num_attention_heads");
  expect_error(config.dump(), errc::missing_field,
               "num_attention_heads: missing from text_config (model_type gemma3)");
}

TEST(ModelLoaderErrors, NegativeHeadsAreInvalid) {
  auto config = test::tiny_llama();
  config["num_attention_heads"] = -4;
  expect_error(config.dump(), errc::invalid_argument, "num_attention_heads: -4");
  config["num_attention_heads"] = 0;
  expect_error(config.dump(), errc::invalid_argument, "num_attention_heads: 0");
}

TEST(ModelLoaderErrors, WrongJsonTypeIsInvalid) {
  auto config = test::tiny_llama();
  config["num_hidden_layers"] = "32";
  expect_error(config.dump(), errc::invalid_argument, "num_hidden_layers: \"32\"");
  config["num_hidden_layers"] = 2.5;
  expect_error(config.dump(), errc::invalid_argument, "num_hidden_layers: 2.5");
  config = test::tiny_llama();
  config["layer_types"] = "full_attention";
  expect_error(config.dump(), errc::invalid_argument, "layer_types");
}

TEST(ModelLoaderErrors, AbsurdLayerCountIsRejected) {
  auto config = test::tiny_llama();
  config["num_hidden_layers"] = 1000000000;
  expect_error(config.dump(), errc::invalid_argument, "num_hidden_layers: 1000000000");
}

TEST(ModelLoaderErrors, MoreKvHeadsThanQueryHeadsIsInvalid) {
  auto config = test::tiny_llama();
  config["num_key_value_heads"] = 24;
  expect_error(config.dump(), errc::invalid_argument, "num_key_value_heads: 24");
}

TEST(ModelLoaderErrors, HiddenSizeMustDivideIntoHeadsWithoutHeadDim) {
  auto config = test::tiny_llama();
  config["hidden_size"] = 770;
  expect_error(config.dump(), errc::invalid_argument, "hidden_size: 770");
  config["head_dim"] = 64; // an explicit head size makes hidden_size irrelevant
  EXPECT_TRUE(load_model_layout(config.dump(), {}, 0));
}

TEST(ModelLoaderErrors, LayerTypesMustMatchTheLayers) {
  auto config = test::tiny_llama();
  config["layer_types"] = {"full_attention"};
  expect_error(config.dump(), errc::invalid_argument, "layer_types: has 1 entries");
  config["layer_types"] = {"full_attention", "global"};
  expect_error(config.dump(), errc::invalid_argument, "layer_types[1]: unknown value 'global'");
}

TEST(ModelLoaderErrors, SlidingLayersNeedAWindow) {
  auto config = test::tiny_llama();
  config["layer_types"] = {"sliding_attention", "full_attention"};
  expect_error(config.dump(), errc::missing_field, "sliding_window: missing");
  config["sliding_window"] = 256;
  auto m = test::layout_of(config);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].kind, layer_kind::sliding_window);
  EXPECT_EQ(m.layers[0].sliding_window, 256);
  EXPECT_EQ(m.layers[1].kind, layer_kind::full);
}

TEST(ModelLoaderErrors, Qwen2WindowStartsAtMaxWindowLayers) {
  auto config = test::shipped_json("qwen2.5-7b");
  config["use_sliding_window"] = true;
  config["max_window_layers"] = 20;
  config["sliding_window"] = 4096;
  auto m = test::layout_of(config);
  EXPECT_EQ(test::indices_of(m, layer_kind::full), test::arithmetic(0, 20, 1));
  EXPECT_EQ(test::indices_of(m, layer_kind::sliding_window), test::arithmetic(20, 28, 1));
  config.erase("max_window_layers");
  expect_error(config.dump(), errc::missing_field, "max_window_layers: missing");
}

} // namespace
} // namespace kvactor
