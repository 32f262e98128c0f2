// Helpers shared by the model loader tests.
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/loader.hpp"

namespace kvactor::test {

inline std::string data_path(std::string_view file) {
  return std::string{KVACTOR_SOURCE_DIR} + "/tests/data/" + std::string{file};
}

inline std::string read_text(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  EXPECT_TRUE(in) << "cannot open " << path;
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// A shipped config as JSON, for tests that change a field.
inline nlohmann::json shipped_json(std::string_view name) {
  return nlohmann::json::parse(
      read_text(std::string{KVACTOR_MODELS_DIR} + "/" + std::string{name} + ".json"));
}

/// A small valid Llama config to change one field of: 2 layers, 12 heads, 4 KV heads, head 64.
inline nlohmann::json tiny_llama() {
  return {{"model_type", "llama"},    {"num_hidden_layers", 2}, {"num_attention_heads", 12},
          {"num_key_value_heads", 4}, {"hidden_size", 768},     {"max_position_embeddings", 4096},
          {"torch_dtype", "bfloat16"}};
}

/// The layout of rank `rank` for a config; an empty layout (and a test failure) on error.
inline model_layout layout_of(const nlohmann::json& config, load_options opt = {},
                              int32_t rank = 0) {
  auto r = load_model_layout(config.dump(), opt, rank);
  if (!r) {
    ADD_FAILURE() << "load_model_layout failed: " << r.err().message;
    return {};
  }
  return std::move(*r);
}

/// Rank 0's layout of a shipped config or file; an empty layout (and a test failure) on error.
inline model_layout load_rank0(std::string_view name, load_options opt = {}) {
  auto r = load_model(name, opt);
  if (!r) {
    ADD_FAILURE() << "load_model(" << name << ") failed: " << r.err().message;
    return {};
  }
  if (r->empty()) {
    ADD_FAILURE() << "load_model(" << name << ") returned no layouts";
    return {};
  }
  return std::move(r->front());
}

/// Layer indices (in output order) of the layers of one kind.
inline std::vector<int32_t> indices_of(const model_layout& m, layer_kind kind) {
  std::vector<int32_t> out;
  for (const auto& l : m.layers)
    if (l.kind == kind) out.push_back(l.index);
  return out;
}

/// start, start + step, ... while < stop
inline std::vector<int32_t> arithmetic(int32_t start, int32_t stop, int32_t step) {
  std::vector<int32_t> out;
  for (int32_t i = start; i < stop; i += step)
    out.push_back(i);
  return out;
}

/// Expects every attention (non-state) layer to have these heads, head size and KV dtype.
inline void expect_heads(const model_layout& m, int32_t heads, int32_t kv_heads, int32_t head_size,
                         dtype kv = dtype::bfloat16) {
  for (const auto& l : m.layers) {
    if (l.kind == layer_kind::mamba) continue;
    SCOPED_TRACE(l.name);
    EXPECT_EQ(l.num_heads, heads);
    EXPECT_EQ(l.num_kv_heads, kv_heads);
    EXPECT_EQ(l.head_size, head_size);
    EXPECT_EQ(l.head_size_v, head_size);
    EXPECT_EQ(l.kv_dtype, kv);
  }
}

} // namespace kvactor::test
