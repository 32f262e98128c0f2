// Finding configs: paths, shipped names, $KVACTOR_MODELS_PATH; and the lists the loader reports.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <unistd.h>

#include "tests/model/model_test_support.hpp"

namespace kvactor {
namespace {

namespace fs = std::filesystem;

/// Sets $KVACTOR_MODELS_PATH for one test and restores it afterwards.
class models_path_guard {
public:
  explicit models_path_guard(const std::string& value) {
    if (const char* old = std::getenv("KVACTOR_MODELS_PATH")) old_ = old;
    ::setenv("KVACTOR_MODELS_PATH", value.c_str(), 1);
  }
  ~models_path_guard() {
    if (old_)
      ::setenv("KVACTOR_MODELS_PATH", old_->c_str(), 1);
    else
      ::unsetenv("KVACTOR_MODELS_PATH");
  }
  models_path_guard(const models_path_guard&) = delete;
  models_path_guard& operator=(const models_path_guard&) = delete;

private:
  std::optional<std::string> old_;
};

TEST(ModelPaths, ShippedNameResolvesBesideTheExecutableNotInTheSourceTree) {
  models_path_guard guard{""};
  auto r = resolve_model_path("llama-3.1-8b");
  ASSERT_TRUE(r) << r.err().message;
  // The build tree copies the configs to share/kvactor/models beside bin/, as an install does.
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_TRUE(fs::equivalent(*r, exe.parent_path().parent_path() / "share/kvactor/models"
                                     / "llama-3.1-8b.json"))
      << *r;
  std::ifstream shipped(*r), source(fs::path{KVACTOR_MODELS_DIR} / "llama-3.1-8b.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(shipped), {}),
            std::string(std::istreambuf_iterator<char>(source), {}))
      << "the copy differs from deploy/models";
  auto with_suffix = resolve_model_path("llama-3.1-8b.json");
  ASSERT_TRUE(with_suffix) << with_suffix.err().message;
  EXPECT_EQ(*with_suffix, *r);
}

TEST(ModelPaths, ExistingPathIsReturnedAsIs) {
  auto path = test::data_path("synthetic-gemma3n-kv-sharing.json");
  auto r = resolve_model_path(path);
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_EQ(*r, path);
}

TEST(ModelPaths, UnknownNameIsAnIoErrorListingShippedNames) {
  auto r = resolve_model_path("no-such-model");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::io_error);
  EXPECT_NE(r.err().message.find("no-such-model"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("llama-3.1-8b"), std::string::npos) << r.err().message;
  auto loaded = load_model("no-such-model", {});
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.err().code, errc::io_error);
}

TEST(ModelPaths, ModelsPathIsSearchedBeforeTheShippedDir) {
  models_path_guard guard{"/nonexistent-kvactor-dir::" + test::data_path("")};
  auto r = resolve_model_path("synthetic-longcat-flash-dual-attention");
  ASSERT_TRUE(r) << r.err().message;
  EXPECT_TRUE(fs::equivalent(*r, test::data_path("synthetic-longcat-flash-dual-attention.json")));
  EXPECT_TRUE(load_model("synthetic-longcat-flash-dual-attention", {}));
  EXPECT_TRUE(resolve_model_path("bert-base-uncased")); // the shipped dir still comes last
}

TEST(ModelPaths, ShippedNamesAreSortedStems) {
  auto names = shipped_model_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* name : {"llama-3.1-8b", "gemma-3-27b-it", "whisper-large-v3", "deepseek-v3"})
    EXPECT_TRUE(std::binary_search(names.begin(), names.end(), name)) << name;
  for (const auto& name : names)
    EXPECT_FALSE(name.ends_with(".json")) << name;
}

TEST(ModelPaths, SupportedModelTypesAreSortedAndComplete) {
  auto types = supported_model_types();
  EXPECT_TRUE(std::is_sorted(types.begin(), types.end()));
  for (const char* t : {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3",
                        "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4", "qwen3_next", "jamba",
                        "whisper", "bert", "gemma3n", "longcat_flash"})
    EXPECT_TRUE(std::binary_search(types.begin(), types.end(), t)) << t;
}

TEST(ModelPaths, LoadErrorsNameTheFile) {
  auto path =
      fs::temp_directory_path() / ("kvactor-model-test-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out{path};
    out << R"({"model_type": "llama"})";
  }
  auto r = load_model(path.string(), {});
  fs::remove(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::missing_field);
  EXPECT_EQ(r.err().message.rfind(path.string() + ": ", 0), 0u) << r.err().message;
}

} // namespace
} // namespace kvactor
