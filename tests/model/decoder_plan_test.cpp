// The GPU decoder's weight plan, checked on the CPU: materialising every device tensor from the
// plan (in float) must give exactly the tensors the CPU decoder loads, fused as decoder_tensor
// says (q, k, v rows; gate, up rows; biases likewise), for every family and tensor-parallel
// rank, and every element of every device tensor must be written exactly once.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "kvactor/kernels/float_convert.h"
#include "kvactor/kernels/sampler.h"
#include "model/hf_decoder_plan.hpp"
#include "tests/support/fixture_paths.hpp"

namespace kvactor::test {
namespace {

using kernels::decoder_tensor;
using T = decoder_tensor;

// Every device tensor of the plan, materialised in float, with a count of writes per element.
struct materialised {
  std::map<std::pair<int32_t, T>, std::vector<float>> values;
  std::map<std::pair<int32_t, T>, std::vector<int>> writes;
};

materialised materialise(const hf_decoder_config& cfg, const std::vector<weight_copy>& plan) {
  materialised m;
  for (const auto& c : plan) {
    const auto key = std::make_pair(c.layer, c.target);
    const auto [rows, cols] = device_tensor_shape(cfg, c.target);
    auto& v = m.values[key];
    auto& w = m.writes[key];
    v.resize(static_cast<size_t>(rows * cols), 0.0f);
    w.resize(v.size(), 0);
    std::vector<float> block(static_cast<size_t>(c.elements()));
    fill_block(c, 0, c.rows, false, reinterpret_cast<std::byte*>(block.data()));
    for (size_t i = 0; i < block.size(); ++i) {
      const auto at = static_cast<size_t>(c.target_offset) + i;
      if (at >= v.size()) {
        ADD_FAILURE() << "layer " << c.layer << " " << to_string(c.target) << ": element " << at
                      << " past " << v.size();
        break;
      }
      v[at] = block[i];
      ++w[at];
    }
  }
  return m;
}

std::vector<float> concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> out;
  for (const auto* p : parts)
    out.insert(out.end(), p->begin(), p->end());
  return out;
}

class DecoderPlan : public ::testing::TestWithParam<std::tuple<std::string, int32_t>> {};

TEST_P(DecoderPlan, DeviceTensorsAreTheCpuDecodersWeightsFused) {
  const auto [family, tp] = GetParam();
  for (int32_t rank = 0; rank < tp; ++rank) {
    auto src = open_hf_decoder(transformers_fixture(family), tp, rank);
    ASSERT_TRUE(src) << src.err().message;
    auto plan = plan_device_weights(src->ckpt, src->config);
    ASSERT_TRUE(plan) << plan.err().message;
    auto cpu = load_decoder_weights(src->ckpt, src->config);
    ASSERT_TRUE(cpu) << cpu.err().message;
    const auto m = materialise(src->config, *plan);
    for (const auto& [key, counts] : m.writes)
      for (size_t i = 0; i < counts.size(); ++i)
        ASSERT_EQ(counts[i], 1) << "layer " << key.first << " " << to_string(key.second)
                                << " element " << i << " (rank " << rank << ")";
    auto expect = [&](int32_t layer, T t, const std::vector<float>& want) {
      const auto it = m.values.find({layer, t});
      if (want.empty()) {
        EXPECT_TRUE(it == m.values.end()) << "layer " << layer << " " << to_string(t);
        return;
      }
      ASSERT_TRUE(it != m.values.end()) << "layer " << layer << " " << to_string(t);
      EXPECT_EQ(it->second, want) << "layer " << layer << " " << to_string(t) << " (rank " << rank
                                  << ")";
    };
    expect(-1, T::embed, cpu->embed);
    expect(-1, T::final_norm, cpu->final_norm);
    expect(-1, T::lm_head, cpu->lm_head);
    for (size_t l = 0; l < cpu->layers.size(); ++l) {
      const auto& L = cpu->layers[l];
      const auto i = static_cast<int32_t>(l);
      expect(i, T::qkv, concat({&L.q, &L.k, &L.v}));
      expect(i, T::qkv_bias, concat({&L.q_bias, &L.k_bias, &L.v_bias}));
      expect(i, T::o, L.o);
      expect(i, T::gate_up, concat({&L.gate, &L.up}));
      expect(i, T::down, L.down);
      expect(i, T::input_norm, L.input_norm);
      expect(i, T::post_attn_norm, L.post_attn_norm);
      expect(i, T::pre_ffn_norm, L.pre_ffn_norm);
      expect(i, T::post_ffn_norm, L.post_ffn_norm);
      expect(i, T::q_norm, L.q_norm);
      expect(i, T::k_norm, L.k_norm);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DenseFamilies, DecoderPlan,
                         ::testing::Combine(::testing::Values("llama", "mistral", "qwen2", "qwen3",
                                                              "gemma2", "gemma3_text", "phi3"),
                                            ::testing::Values(1, 2, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_tp"
                                  + std::to_string(std::get<1>(info.param));
                         });

TEST(DecoderPlan, Bf16BlocksRoundAsTheDeviceStoresThem) {
  auto src = open_hf_decoder(transformers_fixture("llama"), 1, 0);
  ASSERT_TRUE(src) << src.err().message;
  auto plan = plan_device_weights(src->ckpt, src->config);
  ASSERT_TRUE(plan) << plan.err().message;
  const auto& c = plan->front(); // the embedding
  std::vector<uint16_t> bf16(static_cast<size_t>(c.elements()));
  std::vector<float> f32(bf16.size());
  fill_block(c, 0, c.rows, true, reinterpret_cast<std::byte*>(bf16.data()));
  fill_block(c, 0, c.rows, false, reinterpret_cast<std::byte*>(f32.data()));
  for (size_t i = 0; i < f32.size(); ++i)
    ASSERT_EQ(bf16[i], kernels::float_to_bf16(f32[i])) << "element " << i;
}

TEST(DecoderPlan, AMismatchedCheckpointIsRefusedBeforeAnyCopy) {
  auto src = open_hf_decoder(transformers_fixture("llama"), 1, 0);
  ASSERT_TRUE(src) << src.err().message;
  auto cfg = src->config;
  cfg.spec.hidden_size += 8; // the checkpoint no longer fits
  const auto plan = plan_device_weights(src->ckpt, cfg);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.err().message.find("model.embed_tokens.weight has shape"), std::string::npos)
      << plan.err().message;
}

nlohmann::json config_json(const std::string& family) {
  std::ifstream in(transformers_fixture(family) + "/config.json");
  return nlohmann::json::parse(in);
}

// The GPU generates --load-format synthetic weights from generated_tensor_of alone: its formula
// must give every value the CPU's generated checkpoint holds, bit for bit.
TEST(SyntheticWeights, TheGeneratorsFormulaGivesTheCpusValues) {
  const uint64_t seed = 42;
  for (const std::string family : {"llama", "qwen2", "gemma2"}) {
    auto src = synthetic_hf_source(config_json(family), 1, 0, seed);
    ASSERT_TRUE(src) << src.err().message;
    for (const auto& [name, t] : src->ckpt.tensors()) {
      const auto g = generated_tensor_of(src->config, seed, name, t->shape);
      const auto* values = reinterpret_cast<const float*>(t->data);
      for (int64_t i = 0; i < t->elements(); i += 7) {
        const float want =
            g.centre
            + g.scale
                  * static_cast<float>(2.0 * kernels::keyed_uniform(g.key, static_cast<uint64_t>(i))
                                       - 1.0);
        ASSERT_EQ(values[i], want) << family << " " << name << " element " << i;
      }
    }
  }
}

// On the GPU the generated weights are planned from shapes alone: the same plan as for the
// generated checkpoint, with no value on the host.
TEST(SyntheticWeights, AShapesOnlyCheckpointPlansLikeTheGeneratedOne) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    auto shapes = synthetic_hf_shapes(config_json("phi3"), 2, rank);
    auto full = synthetic_hf_source(config_json("phi3"), 2, rank, 7);
    ASSERT_TRUE(shapes && full);
    auto a = plan_device_weights(shapes->ckpt, shapes->config);
    auto b = plan_device_weights(full->ckpt, full->config);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      const auto &x = (*a)[i], &y = (*b)[i];
      EXPECT_EQ(x.source->data, nullptr);
      EXPECT_EQ(x.source->name, y.source->name);
      EXPECT_EQ(
          std::tie(x.target, x.layer, x.target_offset, x.row_begin, x.rows, x.col_begin, x.cols),
          std::tie(y.target, y.layer, y.target_offset, y.row_begin, y.rows, y.col_begin, y.cols));
    }
  }
}

} // namespace
} // namespace kvactor::test
