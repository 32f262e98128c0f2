// Every template in tests/data/chat_templates, on every conversation of conversations.json,
// rendered here and by Python's jinja2 as transformers configures it (render_oracle.py): the
// texts must be equal byte for byte, and where Python raises, so must we. Skipped (reported as
// skipped, never passed) when python3 cannot import jinja2.
#include "model/jinja/template.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using kvactor::jinja::compiled_template;
using nlohmann::ordered_json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool python_has_jinja2() {
  static const bool has = std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0;
  return has;
}

// The oracle's JSON answer for one template; empty when the script failed.
std::string run_oracle(const fs::path& tpl, const fs::path& conversations) {
  std::string command = std::string("python3 '") + KVACTOR_JINJA_ORACLE + "' '" + tpl.string()
                        + "' '" + conversations.string() + "'";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return "";
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  int status = pclose(pipe);
  return status == 0 ? out : "";
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(KVACTOR_CHAT_TEMPLATES_DIR))
    if (entry.path().extension() == ".jinja") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class ChatTemplateOracle : public testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateOracle, RendersEveryConversationAsPythonJinja2Does) {
  if (!python_has_jinja2())
    GTEST_SKIP() << "python3 cannot import jinja2 (install python3-jinja2): oracle not run";
  fs::path dir = KVACTOR_CHAT_TEMPLATES_DIR;
  fs::path tpl_path = dir / GetParam();
  fs::path conversations_path = dir / "conversations.json";
  auto tpl = compiled_template::parse(read_file(tpl_path));
  ASSERT_TRUE(tpl) << tpl.err().message;
  std::string answer = run_oracle(tpl_path, conversations_path);
  ASSERT_FALSE(answer.empty()) << "render_oracle.py failed on " << GetParam();
  auto expected = ordered_json::parse(answer);
  auto conversations = ordered_json::parse(read_file(conversations_path))["conversations"];
  ASSERT_EQ(expected.size(), conversations.size());
  for (size_t i = 0; i < conversations.size(); ++i) {
    SCOPED_TRACE(conversations[i]["name"].get<std::string>());
    auto ours = tpl->render(conversations[i]["context"]);
    if (expected[i]["ok"].get<bool>()) {
      ASSERT_TRUE(ours) << ours.err().message;
      EXPECT_EQ(*ours, expected[i]["text"].get<std::string>());
    } else {
      EXPECT_FALSE(ours) << "Python raised " << expected[i]["error"].get<std::string>()
                         << " but we rendered:\n"
                         << *ours;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, ChatTemplateOracle, testing::ValuesIn(template_names()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.size() - 6);
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

} // namespace
