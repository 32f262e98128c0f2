// Tensor-parallel splits: query heads, KV heads (split or replicated), MLA latents, state dims.
#include "tests/model/model_test_support.hpp"

namespace kvactor {
namespace {

using test::expect_heads;

load_options tp(int32_t size) {
  load_options opt;
  opt.tensor_parallel_size = size;
  return opt;
}

TEST(ModelLoaderSplit, Llama8bTp2HalvesQueryAndKvHeads) {
  auto r = load_model("llama-3.1-8b", tp(2));
  ASSERT_TRUE(r) << r.err().message;
  ASSERT_EQ(r->size(), 2u);
  for (int32_t rank = 0; rank < 2; ++rank) {
    const auto& m = (*r)[static_cast<size_t>(rank)];
    EXPECT_EQ(m.rank, rank);
    EXPECT_EQ(m.tensor_parallel_size, 2);
    EXPECT_EQ(m.num_heads, 32); // totals stay the config's
    EXPECT_EQ(m.num_kv_heads, 8);
    ASSERT_EQ(m.layers.size(), 32u);
    expect_heads(m, 16, 4, 128);
  }
  auto rank1 = (*r)[1];
  rank1.rank = 0;
  EXPECT_EQ(rank1, (*r)[0]); // ranks differ in nothing but their number
}

TEST(ModelLoaderSplit, Llama8bTp16ReplicatesKvHeads) {
  auto m = test::load_rank0("llama-3.1-8b", tp(16));
  ASSERT_EQ(m.layers.size(), 32u);
  expect_heads(m, 2, 1, 128);
}

TEST(ModelLoaderSplit, Qwen25Tp3IsAnInvalidSplit) {
  auto r = load_model("qwen2.5-7b", tp(3));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::invalid_split);
  EXPECT_NE(r.err().message.find("num_attention_heads: 28 is not divisible by "
                                 "--tensor-parallel-size 3"),
            std::string::npos)
      << r.err().message;
}

TEST(ModelLoaderSplit, KvHeadsMustSplitEvenlyOrReplicateEvenly) {
  auto config = test::tiny_llama();                        // 12 heads, 4 KV heads
  auto fewer = load_model_layout(config.dump(), tp(6), 0); // 6 % 4 != 0
  ASSERT_FALSE(fewer);
  EXPECT_EQ(fewer.err().code, errc::invalid_split);
  EXPECT_NE(fewer.err().message.find("num_key_value_heads: 4"), std::string::npos)
      << fewer.err().message;
  config["num_key_value_heads"] = 6;
  auto more = load_model_layout(config.dump(), tp(4), 0); // 6 % 4 != 0
  ASSERT_FALSE(more);
  EXPECT_EQ(more.err().code, errc::invalid_split);
  EXPECT_NE(more.err().message.find("num_key_value_heads: 6"), std::string::npos)
      << more.err().message;
}

TEST(ModelLoaderSplit, DeepSeekTp8SplitsQueryHeadsAndKeepsTheLatent) {
  auto m = test::load_rank0("deepseek-v3", tp(8));
  ASSERT_EQ(m.layers.size(), 61u);
  for (const auto& l : m.layers) {
    EXPECT_EQ(l.num_heads, 16);
    EXPECT_EQ(l.num_kv_heads, 1);
    EXPECT_EQ(l.head_size, 576);
  }
}

TEST(ModelLoaderSplit, Qwen3NextTp2SplitsGatedDeltaNetState) {
  auto m = test::load_rank0("qwen3-next-80b-a3b", tp(2));
  ASSERT_EQ(m.layers.size(), 48u);
  expect_heads(m, 8, 1, 256);
  EXPECT_EQ(m.layers[0].state_shapes,
            (std::vector<std::vector<int64_t>>{{4096, 3}, {16, 128, 128}}));
}

TEST(ModelLoaderSplit, JambaTp2SplitsMambaState) {
  auto m = test::load_rank0("ai21-jamba-1.5-mini", tp(2));
  ASSERT_EQ(m.layers.size(), 32u);
  expect_heads(m, 16, 4, 128);
  EXPECT_EQ(m.layers[0].state_shapes, (std::vector<std::vector<int64_t>>{{4096, 3}, {4096, 16}}));
}

TEST(ModelLoaderSplit, StateDimsMustSplitEvenly) {
  auto config = test::shipped_json("qwen3-next-80b-a3b");
  config["linear_num_key_heads"] = 6; // heads 16 and KV heads 2 still split over 4
  auto r = load_model_layout(config.dump(), tp(4), 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::invalid_split);
  EXPECT_NE(r.err().message.find("linear_num_key_heads: 6"), std::string::npos) << r.err().message;
}

TEST(ModelLoaderSplit, ZeroTensorParallelSizeIsInvalid) {
  auto file = load_model("llama-3.1-8b", tp(0));
  ASSERT_FALSE(file);
  EXPECT_EQ(file.err().code, errc::invalid_argument);
  EXPECT_NE(file.err().message.find("--tensor-parallel-size: 0"), std::string::npos)
      << file.err().message;
  auto text = load_model_layout(test::tiny_llama().dump(), tp(0), 0);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.err().code, errc::invalid_argument);
}

TEST(ModelLoaderSplit, RankOutsideTheGroupIsInvalid) {
  auto r = load_model_layout(test::tiny_llama().dump(), tp(2), 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::invalid_argument);
  EXPECT_NE(r.err().message.find("rank: 2"), std::string::npos) << r.err().message;
}

} // namespace
} // namespace kvactor
