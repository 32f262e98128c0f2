// One test per shipped config (deploy/models): layer count, kinds, heads, head size, windows,
// dtype.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "tests/model/model_test_support.hpp"

namespace kvactor {
namespace {

using test::arithmetic;
using test::expect_heads;
using test::indices_of;
using test::load_rank0;

TEST(ModelLoader, Llama8bHas32FullGqaLayers) {
  auto m = load_rank0("llama-3.1-8b");
  EXPECT_EQ(m.model_type, "llama");
  EXPECT_EQ(m.rank, 0);
  EXPECT_EQ(m.tensor_parallel_size, 1);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.max_position_embeddings, 131072);
  EXPECT_EQ(m.max_encoder_input_tokens, 0);
  EXPECT_EQ(m.model_dtype, dtype::bfloat16);
  EXPECT_EQ(m.num_attn_modules, 1);
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(indices_of(m, layer_kind::full), arithmetic(0, 32, 1));
  expect_heads(m, 32, 8, 128);
  EXPECT_EQ(m.layers[7].name, "model.layers.7.self_attn.attn");
  EXPECT_EQ(m.layers[7].index, 7);
  for (const auto& l : m.layers) {
    EXPECT_EQ(l.sliding_window, 0);
    EXPECT_EQ(l.attention_chunk_size, 0);
    EXPECT_FALSE(l.has_sinks);
    EXPECT_TRUE(l.use_rope);
    EXPECT_TRUE(l.kv_sharing_target.empty());
    EXPECT_TRUE(l.state_shapes.empty());
  }
}

TEST(ModelLoader, Llama70bHas80FullGqaLayers) {
  auto m = load_rank0("llama-3.1-70b");
  ASSERT_EQ(m.layers.size(), 80u);
  EXPECT_EQ(indices_of(m, layer_kind::full).size(), 80u);
  expect_heads(m, 64, 8, 128);
}

TEST(ModelLoader, MistralSlidesEveryLayer) {
  auto m = load_rank0("mistral-7b-v0.1");
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(indices_of(m, layer_kind::sliding_window), arithmetic(0, 32, 1));
  for (const auto& l : m.layers)
    EXPECT_EQ(l.sliding_window, 4096);
  expect_heads(m, 32, 8, 128);
  EXPECT_EQ(m.max_position_embeddings, 32768);
}

TEST(ModelLoader, Phi3MiniSlidesEveryLayer) {
  auto m = load_rank0("phi-3-mini-4k-instruct");
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(indices_of(m, layer_kind::sliding_window).size(), 32u);
  for (const auto& l : m.layers)
    EXPECT_EQ(l.sliding_window, 2047);
  expect_heads(m, 32, 32, 96); // 3072 / 32, no head_dim in the config
}

TEST(ModelLoader, Qwen25IgnoresWindowWhenDisabled) {
  auto m = load_rank0("qwen2.5-7b");
  ASSERT_EQ(m.layers.size(), 28u);
  EXPECT_EQ(indices_of(m, layer_kind::full).size(), 28u);
  for (const auto& l : m.layers)
    EXPECT_EQ(l.sliding_window, 0);
  expect_heads(m, 28, 4, 128);
}

TEST(ModelLoader, Qwen3UsesHeadDim) {
  auto m = load_rank0("qwen3-8b");
  ASSERT_EQ(m.layers.size(), 36u);
  EXPECT_EQ(indices_of(m, layer_kind::full).size(), 36u);
  expect_heads(m, 32, 8, 128);
  EXPECT_EQ(m.max_position_embeddings, 40960);
}

TEST(ModelLoader, Gemma2AlternatesSlidingAndFull) {
  auto m = load_rank0("gemma-2-9b-it");
  ASSERT_EQ(m.layers.size(), 42u);
  EXPECT_EQ(indices_of(m, layer_kind::sliding_window), arithmetic(0, 42, 2));
  EXPECT_EQ(indices_of(m, layer_kind::full), arithmetic(1, 42, 2));
  EXPECT_EQ(m.layers[0].sliding_window, 4096);
  EXPECT_EQ(m.layers[1].sliding_window, 0);
  expect_heads(m, 16, 8, 256);
}

TEST(ModelLoader, Gemma3FollowsLayerTypes) {
  auto m = load_rank0("gemma-3-27b-it");
  EXPECT_EQ(m.model_type, "gemma3");
  EXPECT_EQ(m.model_dtype, dtype::bfloat16); // top-level "dtype"
  EXPECT_EQ(m.max_position_embeddings, 131072);
  ASSERT_EQ(m.layers.size(), 62u);
  EXPECT_EQ(indices_of(m, layer_kind::full), arithmetic(5, 62, 6));
  EXPECT_EQ(indices_of(m, layer_kind::sliding_window).size(), 52u);
  for (const auto& l : m.layers)
    EXPECT_EQ(l.sliding_window, l.kind == layer_kind::sliding_window ? 1024 : 0);
  expect_heads(m, 32, 16, 128);
}

TEST(ModelLoader, Gemma3PatternMatchesLayerTypes) {
  auto config = test::shipped_json("gemma-3-27b-it");
  auto from_types = test::layout_of(config);
  config["text_config"].erase("layer_types"); // leaves _sliding_window_pattern 6
  EXPECT_EQ(test::layout_of(config), from_types);
  config["text_config"].erase("_sliding_window_pattern"); // the default is 6 as well
  EXPECT_EQ(test::layout_of(config), from_types);
}

TEST(ModelLoader, GptOssHasSinksOnAlternatingLayers) {
  auto m = load_rank0("gpt-oss-20b");
  EXPECT_EQ(m.model_dtype, dtype::bfloat16); // no torch_dtype in the config
  ASSERT_EQ(m.layers.size(), 24u);
  EXPECT_EQ(indices_of(m, layer_kind::sliding_window), arithmetic(0, 24, 2));
  EXPECT_EQ(indices_of(m, layer_kind::full), arithmetic(1, 24, 2));
  for (const auto& l : m.layers) {
    EXPECT_TRUE(l.has_sinks);
    EXPECT_EQ(l.sliding_window, l.kind == layer_kind::sliding_window ? 128 : 0);
  }
  expect_heads(m, 64, 8, 64);
}

TEST(ModelLoader, Llama4ScoutChunksAllButEveryFourthLayer) {
  auto m = load_rank0("llama-4-scout-17b-16e-instruct");
  EXPECT_EQ(m.model_type, "llama4");
  EXPECT_EQ(m.max_position_embeddings, 10485760);
  ASSERT_EQ(m.layers.size(), 48u);
  EXPECT_EQ(indices_of(m, layer_kind::full), arithmetic(3, 48, 4));
  EXPECT_EQ(indices_of(m, layer_kind::chunked_local).size(), 36u);
  for (const auto& l : m.layers) {
    bool nope = l.kind == layer_kind::full;
    EXPECT_EQ(l.use_rope, !nope) << l.name;
    EXPECT_EQ(l.attention_chunk_size, nope ? 0 : 8192) << l.name;
  }
  expect_heads(m, 40, 8, 128);
}

TEST(ModelLoader, Llama4FollowsNoRopeLayers) {
  auto config = test::shipped_json("llama-4-scout-17b-16e-instruct");
  std::vector<int> no_rope(48, 1);
  no_rope[0] = 0;
  no_rope[10] = 0;
  config["text_config"]["no_rope_layers"] = no_rope;
  auto m = test::layout_of(config);
  EXPECT_EQ(indices_of(m, layer_kind::full), (std::vector<int32_t>{0, 10}));
  EXPECT_EQ(indices_of(m, layer_kind::chunked_local).size(), 46u);
}

TEST(ModelLoader, Qwen3NextMixesFullAttentionAndGatedDeltaNet) {
  auto m = load_rank0("qwen3-next-80b-a3b");
  ASSERT_EQ(m.layers.size(), 48u);
  EXPECT_EQ(indices_of(m, layer_kind::full), arithmetic(3, 48, 4));
  EXPECT_EQ(indices_of(m, layer_kind::mamba).size(), 36u);
  expect_heads(m, 16, 2, 256);
  EXPECT_EQ(m.layers[3].name, "model.layers.3.self_attn.attn");
  const auto& linear = m.layers[0];
  EXPECT_EQ(linear.name, "model.layers.0.linear_attn");
  EXPECT_EQ(linear.state_type, "gated_delta_net");
  // conv_dim = 2 x 16 x 128 + 32 x 128 = 8192; kernel 4 keeps 3 inputs.
  EXPECT_EQ(linear.state_shapes, (std::vector<std::vector<int64_t>>{{8192, 3}, {32, 128, 128}}));
  EXPECT_EQ(linear.state_dtypes, (std::vector<dtype>{dtype::bfloat16, dtype::bfloat16}));
}

TEST(ModelLoader, JambaHasAttentionEveryEighthLayer) {
  auto m = load_rank0("ai21-jamba-1.5-mini");
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(indices_of(m, layer_kind::full), (std::vector<int32_t>{4, 12, 20, 28}));
  EXPECT_EQ(indices_of(m, layer_kind::mamba).size(), 28u);
  expect_heads(m, 32, 8, 128);
  const auto& mamba = m.layers[0];
  EXPECT_EQ(mamba.name, "model.layers.0.mamba");
  EXPECT_EQ(mamba.state_type, "mamba1");
  // intermediate = mamba_expand 2 x hidden_size 4096; d_conv 4; d_state 16.
  EXPECT_EQ(mamba.state_shapes, (std::vector<std::vector<int64_t>>{{8192, 3}, {8192, 16}}));
  EXPECT_EQ(mamba.state_dtypes, (std::vector<dtype>{dtype::bfloat16, dtype::bfloat16}));
}

TEST(ModelLoader, WhisperHasSelfCrossAndEncoderLayers) {
  auto m = load_rank0("whisper-large-v3");
  EXPECT_EQ(m.model_dtype, dtype::float16); // "dtype", the newer spelling of torch_dtype
  EXPECT_EQ(m.max_position_embeddings, 448);
  EXPECT_EQ(m.max_encoder_input_tokens, 1500);
  EXPECT_EQ(m.num_heads, 20);
  EXPECT_EQ(m.num_kv_heads, 20);
  ASSERT_EQ(m.layers.size(), 96u);
  EXPECT_EQ(indices_of(m, layer_kind::full), arithmetic(0, 32, 1));
  EXPECT_EQ(indices_of(m, layer_kind::cross_attention), arithmetic(0, 32, 1));
  EXPECT_EQ(indices_of(m, layer_kind::encoder_only), arithmetic(0, 32, 1));
  expect_heads(m, 20, 20, 64, dtype::float16);
  auto named = [&](const std::string& name) {
    return std::any_of(m.layers.begin(), m.layers.end(),
                       [&](const attention_layer& l) { return l.name == name; });
  };
  EXPECT_TRUE(named("model.decoder.layers.31.self_attn.attn"));
  EXPECT_TRUE(named("model.decoder.layers.31.encoder_attn.attn"));
  EXPECT_TRUE(named("model.encoder.layers.0.self_attn.attn"));
}

TEST(ModelLoader, BertIsEncoderOnly) {
  auto m = load_rank0("bert-base-uncased");
  EXPECT_EQ(m.model_dtype, dtype::bfloat16); // no dtype in the config
  EXPECT_EQ(m.max_position_embeddings, 512);
  ASSERT_EQ(m.layers.size(), 12u);
  EXPECT_EQ(indices_of(m, layer_kind::encoder_only), arithmetic(0, 12, 1));
  EXPECT_EQ(m.layers[11].name, "model.encoder.layer.11.attention.attn");
  expect_heads(m, 12, 12, 64);
}

TEST(ModelLoader, DeepSeekV3IsMlaWithOneLatent) {
  auto m = load_rank0("deepseek-v3");
  EXPECT_EQ(m.num_heads, 128);
  EXPECT_EQ(m.num_kv_heads, 1);
  ASSERT_EQ(m.layers.size(), 61u);
  EXPECT_EQ(indices_of(m, layer_kind::mla), arithmetic(0, 61, 1));
  for (const auto& l : m.layers) {
    EXPECT_EQ(l.num_heads, 128);
    EXPECT_EQ(l.num_kv_heads, 1);
    EXPECT_EQ(l.head_size, 576); // kv_lora_rank 512 + qk_rope_head_dim 64
    EXPECT_EQ(l.head_size_v, 0);
  }
}

// The file names in the table of deploy/models/SOURCES.md ("| llama-3.1-8b.json | ..."), stems
// sorted.
std::vector<std::string> names_in_sources_md() {
  std::ifstream in(std::string{KVACTOR_SOURCE_DIR} + "/deploy/models/SOURCES.md");
  EXPECT_TRUE(in) << "deploy/models/SOURCES.md";
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto end = line.find(".json |");
    if (line.rfind("| ", 0) == 0 && end != std::string::npos)
      out.push_back(line.substr(2, end - 2));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ModelLoader, EveryShippedConfigLoads) {
  auto names = shipped_model_names();
  // Exactly the configs SOURCES.md documents (the 15 real ones and the synthetic default).
  EXPECT_EQ(names, names_in_sources_md());
  EXPECT_EQ(names.size(), 16u);
  auto types = supported_model_types();
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    auto m = load_rank0(name);
    EXPECT_FALSE(m.layers.empty());
    EXPECT_TRUE(std::binary_search(types.begin(), types.end(), m.model_type));
  }
}

} // namespace
} // namespace kvactor

TEST(ModelLoader, ReadsTheWidthsOfTheSyntheticAttentionStack) {
  auto llama = kvactor::load_model("llama-3.1-8b", {});
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->front().hidden_size, 4096);
  EXPECT_EQ(llama->front().vocab_size, 128256);
  auto whisper = kvactor::load_model("whisper-large-v3", {});
  ASSERT_TRUE(whisper);
  EXPECT_EQ(whisper->front().hidden_size, 1280);
  auto gemma2 = kvactor::load_model("gemma-2-9b-it", {});
  ASSERT_TRUE(gemma2);
  EXPECT_FLOAT_EQ(gemma2->front().layers[0].logit_softcap, 50.0f);
  auto gemma3 = kvactor::load_model("gemma-3-27b-it", {});
  ASSERT_TRUE(gemma3);
  EXPECT_EQ(gemma3->front().vocab_size, 262208);
  EXPECT_FLOAT_EQ(gemma3->front().layers[0].logit_softcap, 0.0f); // null in the config
}
