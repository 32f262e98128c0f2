// --dtype and --kv-cache-dtype against the config's torch_dtype / dtype.
#include "tests/model/model_test_support.hpp"

namespace kvactor {
namespace {

load_options dtypes(std::string model, std::string kv = "auto") {
  load_options opt;
  opt.dtype = std::move(model);
  opt.kv_cache_dtype = std::move(kv);
  return opt;
}

TEST(ModelLoaderDtype, AutoKeepsHalfPrecisionConfigDtypes) {
  auto config = test::tiny_llama();
  config["torch_dtype"] = "float16";
  auto m = test::layout_of(config);
  EXPECT_EQ(m.model_dtype, dtype::float16);
  for (const auto& l : m.layers)
    EXPECT_EQ(l.kv_dtype, dtype::float16);
}

TEST(ModelLoaderDtype, AutoServesFloat32ConfigsInBfloat16) {
  auto config = test::tiny_llama();
  config["torch_dtype"] = "float32";
  EXPECT_EQ(test::layout_of(config).model_dtype, dtype::bfloat16);
  EXPECT_EQ(test::layout_of(config, dtypes("float32")).model_dtype, dtype::float32);
}

TEST(ModelLoaderDtype, MissingDtypeMeansBfloat16) {
  auto config = test::tiny_llama();
  config.erase("torch_dtype");
  EXPECT_EQ(test::layout_of(config).model_dtype, dtype::bfloat16);
}

TEST(ModelLoaderDtype, TextConfigDtypeIsUsedWhenTopLevelHasNone) {
  auto config = test::shipped_json("llama-4-scout-17b-16e-instruct");
  config.erase("torch_dtype");
  config["text_config"]["torch_dtype"] = "float16";
  EXPECT_EQ(test::layout_of(config).model_dtype, dtype::float16);
}

TEST(ModelLoaderDtype, ExplicitDtypeOverridesTheConfig) {
  auto m = test::layout_of(test::tiny_llama(), dtypes("float16"));
  EXPECT_EQ(m.model_dtype, dtype::float16);
  for (const auto& l : m.layers)
    EXPECT_EQ(l.kv_dtype, dtype::float16);
}

TEST(ModelLoaderDtype, Fp8KvCacheLeavesModelAndStateDtypes) {
  auto m = test::load_rank0("ai21-jamba-1.5-mini", dtypes("auto", "fp8"));
  EXPECT_EQ(m.model_dtype, dtype::bfloat16);
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(m.layers[4].kv_dtype, dtype::fp8_e4m3);
  EXPECT_EQ(m.layers[0].state_dtypes, (std::vector<dtype>{dtype::bfloat16, dtype::bfloat16}));
  auto mla = test::load_rank0("deepseek-v3", dtypes("auto", "fp8"));
  ASSERT_FALSE(mla.layers.empty());
  EXPECT_EQ(mla.layers[0].kv_dtype, dtype::fp8_e4m3);
}

TEST(ModelLoaderDtype, UnknownDtypeFlagIsNamed) {
  auto r = load_model_layout(test::tiny_llama().dump(), dtypes("float64"), 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::invalid_argument);
  EXPECT_NE(r.err().message.find("--dtype"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("float64"), std::string::npos) << r.err().message;
  // fp8 is a KV cache dtype, not a model dtype.
  auto fp8 = load_model_layout(test::tiny_llama().dump(), dtypes("fp8"), 0);
  ASSERT_FALSE(fp8);
  EXPECT_EQ(fp8.err().code, errc::invalid_argument);
}

TEST(ModelLoaderDtype, UnknownKvCacheDtypeFlagIsNamed) {
  auto r = load_model_layout(test::tiny_llama().dump(), dtypes("auto", "int4"), 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::invalid_argument);
  EXPECT_NE(r.err().message.find("--kv-cache-dtype"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("int4"), std::string::npos) << r.err().message;
}

TEST(ModelLoaderDtype, UnknownConfigDtypeIsNamed) {
  auto config = test::tiny_llama();
  config["torch_dtype"] = "float64";
  auto r = load_model_layout(config.dump(), {}, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::invalid_argument);
  EXPECT_NE(r.err().message.find("torch_dtype: unknown value 'float64'"), std::string::npos)
      << r.err().message;
}

} // namespace
} // namespace kvactor
