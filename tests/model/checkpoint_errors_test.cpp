// Bad checkpoints are errors that say what is wrong, never a crash or a silent misread: hostile
// safetensors headers, tensors missing, mis-shaped or unexpected for the config, families and
// options kvactor plans but does not run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/hf_decoder.hpp"
#include "model/safetensors.hpp"
#include "tests/support/fixture_paths.hpp"
#include "tests/support/temp_dir.hpp"

namespace kvactor::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

// A .safetensors file with header `header` (as written) and `data_bytes` zero bytes of data.
void write_safetensors(const std::string& path, const std::string& header, size_t data_bytes,
                       uint64_t claimed_len = 0) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = claimed_len ? claimed_len : header.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << header << std::string(data_bytes, '\0');
}

std::string open_error(const std::string& path) {
  auto f = safetensors_file::open(path);
  return f ? "" : f.err().message;
}

TEST(Safetensors, HostileHeadersAreRefusedNamingFileAndTensor) {
  temp_dir d("kvactor-ckpt");
  const auto f = d.file("x.safetensors");
  std::ofstream(f) << "abc";
  EXPECT_THAT(open_error(f), HasSubstr("shorter than the 8-byte header length"));
  write_safetensors(f, "{}", 0, uint64_t{1} << 40);
  EXPECT_THAT(open_error(f), HasSubstr("header length 1099511627776 does not fit the file"));
  write_safetensors(f, "{not json", 0);
  EXPECT_THAT(open_error(f), HasSubstr("the header is not a JSON object"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"w": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}})", "tensor w: dtype I8"},
      {R"({"w": {"dtype": "F32", "shape": [2]}})", "tensor w: needs dtype, shape and data_offsets"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 800]}})",
       "data_offsets [0, 800] leave the 8 data bytes"},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
       "8 bytes for shape [3] of F32 (12 expected)"},
      {R"({"w": {"dtype": "BF16", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
       "is too large"},
      {R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})",
       "shape entry -2 is not a size"},
  };
  for (const auto& [header, why] : cases) {
    write_safetensors(f, header, 8);
    const auto e = open_error(f);
    EXPECT_THAT(e, HasSubstr(why)) << header;
    EXPECT_THAT(e, HasSubstr(f));
  }
}

TEST(Safetensors, ReadsEveryFloatDtypeAsFloat) {
  temp_dir d("kvactor-ckpt");
  const auto f = d.file("x.safetensors");
  // 1.5 in F32, F16 (0x3e00) and BF16 (0x3fc0), little-endian.
  const std::string header = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                             R"( "b": {"dtype": "F16", "shape": [1], "data_offsets": [4, 6]},)"
                             R"( "c": {"dtype": "BF16", "shape": [1], "data_offsets": [6, 8]}})";
  {
    std::ofstream out(f, std::ios::binary);
    const uint64_t len = header.size();
    for (int i = 0; i < 8; ++i)
      out.put(static_cast<char>((len >> (8 * i)) & 0xff));
    out << header;
    const unsigned char data[8] = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x3e, 0xc0, 0x3f};
    out.write(reinterpret_cast<const char*>(data), 8);
  }
  auto file = safetensors_file::open(f);
  ASSERT_TRUE(file) << file.err().message;
  for (const char* name : {"a", "b", "c"}) {
    float x = 0;
    to_float((*file)->tensors().at(name), 0, 1, &x);
    EXPECT_EQ(x, 1.5f) << name;
  }
}

json config_of(const std::string& family) {
  std::ifstream in(transformers_fixture(family) + "/config.json");
  return json::parse(in);
}

std::string weights_error(const json& config) {
  auto cfg = read_decoder_config(config, 1, 0);
  if (!cfg) return cfg.err().message;
  auto ck = checkpoint::open(transformers_fixture("llama"));
  if (!ck) return ck.err().message;
  auto w = load_decoder_weights(*ck, *cfg);
  return w ? "" : w.err().message;
}

TEST(HfDecoder, OneErrorListsEveryMissingMisShapedAndUnexpectedTensor) {
  auto c = config_of("llama");
  c["num_hidden_layers"] = 5; // layer 4 is not in the checkpoint
  EXPECT_THAT(weights_error(c), HasSubstr("missing model.layers.4.self_attn.q_proj.weight "
                                          "(expected [64, 64])"));
  c["num_hidden_layers"] = 3; // layer 3 is left over
  EXPECT_THAT(weights_error(c), HasSubstr("unexpected model.layers.3.mlp.up_proj.weight "
                                          "(shape [128, 64])"));
  c["num_hidden_layers"] = 5;
  c["intermediate_size"] = 96; // 12 mis-shaped MLP tensors, and layer 4's 9 missing
  const auto e = weights_error(c);
  EXPECT_THAT(e, HasSubstr("checkpoint does not match model_type llama: "));
  EXPECT_THAT(e, HasSubstr("model.layers.0.mlp.gate_proj.weight has shape [128, 64], expected "
                           "[96, 64]"));
  EXPECT_THAT(e, HasSubstr("; and 9 more")) << "12 listed, the rest counted";
}

TEST(HfDecoder, FamiliesAndOptionsItDoesNotRunAreRefusedByName) {
  json moe = {{"model_type", "deepseek_v3"}};
  EXPECT_THAT(read_decoder_config(moe, 1, 0).err().message,
              HasSubstr("model_type deepseek_v3: kvactor plans it but runs only the dense "
                        "families"));
  // Each planned family says what is missing to run it.
  for (const auto& [type, missing] : std::vector<std::pair<std::string, std::string>>{
           {"deepseek_v3", "no mixture-of-experts MLP"},
           {"gpt_oss", "no mixture-of-experts MLP (MXFP4 experts)"},
           {"llama4", "no mixture-of-experts MLP and no chunked-attention layers"},
           {"qwen3_next", "no Gated DeltaNet linear-attention layers"},
           {"jamba", "no Mamba layers"},
           {"gemma3", "this is the vision-language wrapper"}})
    EXPECT_THAT(read_decoder_config({{"model_type", type}}, 1, 0).err().message,
                HasSubstr("its weights are not loaded: " + missing))
        << type;
  auto yarn = config_of("llama");
  yarn["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}};
  EXPECT_THAT(read_decoder_config(yarn, 1, 0).err().message,
              HasSubstr("rope_type yarn: kvactor runs default, linear and llama3 RoPE"));
  auto act = config_of("llama");
  act["hidden_act"] = "relu";
  EXPECT_THAT(read_decoder_config(act, 1, 0).err().message,
              HasSubstr("hidden_act: relu (kvactor runs silu and gelu_pytorch_tanh)"));
  auto split = config_of("llama");
  EXPECT_THAT(read_decoder_config(split, 3, 0).err().message, HasSubstr("num_attention_heads"));
}

// Found by fuzzing config.json: json::value() threw out of the loader for a field of the wrong
// type (tests/fuzz/corpus/config/regression-wrong-type.json).
TEST(HfDecoder, AFieldOfTheWrongTypeIsAnErrorNamingItNotAnException) {
  for (const char* field : {"tie_word_embeddings", "attention_bias", "mlp_bias"}) {
    auto c = config_of("llama");
    c[field] = "yes";
    const auto r = read_decoder_config(c, 1, 0);
    ASSERT_FALSE(r) << field;
    EXPECT_THAT(r.err().message, HasSubstr(std::string(field) + ": \"yes\" is not a boolean"));
  }
}

TEST(HfDecoder, ReadsTheHubsRopeFieldsAsWellAsTransformers5s) {
  auto hub = config_of("llama");
  const auto v5 = read_decoder_config(hub, 1, 0);
  ASSERT_TRUE(v5);
  hub.erase("rope_parameters");
  hub["rope_theta"] = 10000.0;
  hub["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 16}};
  const auto old = read_decoder_config(hub, 1, 0);
  ASSERT_TRUE(old) << old.err().message;
  const auto& a = v5->spec.layers[0].rope;
  const auto& b = old->spec.layers[0].rope;
  EXPECT_EQ(kernels::rope_inverse_frequencies(a, 16), kernels::rope_inverse_frequencies(b, 16));
  EXPECT_TRUE(b.llama3);
}

} // namespace
} // namespace kvactor::test

namespace kvactor::test {
namespace {

// Writes `names` of `from` into one .safetensors file at `path` (bytes as they are mapped).
void write_shard(const checkpoint& from, const std::vector<std::string>& names,
                 const std::string& path) {
  json header = json::object();
  size_t offset = 0;
  for (const auto& n : names) {
    const auto* t = from.find(n);
    header[n] = {{"dtype", to_string(t->dtype)},
                 {"shape", t->shape},
                 {"data_offsets", {offset, offset + t->bytes}}};
    offset += t->bytes;
  }
  const auto text = header.dump();
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << text;
  for (const auto& n : names) {
    const auto* t = from.find(n);
    out.write(reinterpret_cast<const char*>(t->data), static_cast<std::streamsize>(t->bytes));
  }
}

TEST(Checkpoint, ShardsListedByTheIndexLoadAsOneCheckpoint) {
  auto whole = checkpoint::open(transformers_fixture("qwen3"));
  ASSERT_TRUE(whole) << whole.err().message;
  temp_dir d("kvactor-ckpt");
  std::vector<std::string> first, second;
  json index = {{"metadata", {{"total_size", whole->total_bytes()}}},
                {"weight_map", json::object()}};
  for (const auto& [name, t] : whole->tensors()) {
    const bool early = name.find("layers.2.") == std::string::npos
                       && name.find("layers.3.") == std::string::npos
                       && name != "model.norm.weight";
    (early ? first : second).push_back(name);
    index["weight_map"][name] =
        early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_shard(*whole, first, d.file("model-00001-of-00002.safetensors"));
  write_shard(*whole, second, d.file("model-00002-of-00002.safetensors"));
  std::ofstream(d.file("model.safetensors.index.json")) << index.dump();
  fs::copy_file(transformers_fixture("qwen3") + "/config.json", d.file("config.json"));
  auto sharded = checkpoint::open(d.path.string());
  ASSERT_TRUE(sharded) << sharded.err().message;
  EXPECT_EQ(sharded->tensors().size(), whole->tensors().size());
  EXPECT_EQ(sharded->total_bytes(), whole->total_bytes());
  auto a = load_hf_decoder(transformers_fixture("qwen3"));
  auto b = load_hf_decoder(d.path.string());
  ASSERT_TRUE(a && b) << (b ? "" : b.err().message);
  EXPECT_EQ(a->weights.layers[3].down, b->weights.layers[3].down);
  EXPECT_EQ(a->weights.embed, b->weights.embed);
  // A shard the index names but the directory lacks is an error naming it.
  fs::remove(d.file("model-00002-of-00002.safetensors"));
  auto missing = checkpoint::open(d.path.string());
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.err().message, HasSubstr("model-00002-of-00002.safetensors"));
}

TEST(Checkpoint, AnIndexNamingAShardOutsideTheDirectoryIsRefused) {
  temp_dir d("kvactor-ckpt");
  std::ofstream(d.file("model.safetensors.index.json"))
      << R"({"weight_map": {"w": "../../etc/passwd"}})";
  auto c = checkpoint::open(d.path.string());
  ASSERT_FALSE(c);
  EXPECT_THAT(c.err().message, HasSubstr("is not a file name"));
}

} // namespace
} // namespace kvactor::test
