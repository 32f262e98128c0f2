// A model directory's chat template: found where transformers looks (chat_template.jinja, then
// tokenizer_config.json's string or "default" entry), or given as a file; rendered with the
// model's special tokens; refused at load when the interpreter lacks a construct, and a clear
// error when the model has none.
#include "model/chat_template.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.hpp"

namespace kvactor {
namespace {

using json = nlohmann::ordered_json;

std::string template_text(const std::string& name) {
  std::ifstream in(std::string(KVACTOR_CHAT_TEMPLATES_DIR) + "/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json config_with(const json& chat_template) {
  return {{"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
          {"eos_token", "</s>"},
          {"chat_template", chat_template}};
}

const json conversation = json::array({{{"role", "user"}, {"content", "Hi"}}});

TEST(ChatTemplate, TokenizerConfigsTemplateRendersTheConversationWithItsSpecialTokens) {
  test::temp_dir dir("kvactor-chat");
  dir.write("tokenizer_config.json",
            config_with("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}"
                        "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")
                .dump());
  auto t = chat_template::load(dir.path.string());
  ASSERT_TRUE(t) << t.err().message;
  EXPECT_EQ(t->bos_token(), "<s>") << "a special token may be an object with its content";
  EXPECT_EQ(t->eos_token(), "</s>");
  auto text = t->render(conversation, true);
  ASSERT_TRUE(text) << text.err().message;
  EXPECT_EQ(*text, "<s>[user] Hi[assistant]");
  EXPECT_EQ(*t->render(conversation, false), "<s>[user] Hi");
}

TEST(ChatTemplate, ARealTemplateRendersAsItsModelExpects) {
  test::temp_dir dir("kvactor-chat");
  dir.write("tokenizer_config.json",
            config_with(template_text("Qwen-Qwen2.5-7B-Instruct.jinja")).dump());
  auto t = chat_template::load(dir.path.string());
  ASSERT_TRUE(t) << t.err().message;
  auto text = t->render(conversation, true);
  ASSERT_TRUE(text) << text.err().message;
  EXPECT_EQ(*text, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                   "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, ChatTemplateJinjaWinsAndAFileWinsOverBoth) {
  test::temp_dir dir("kvactor-chat");
  dir.write("tokenizer_config.json", config_with("config").dump());
  dir.write("chat_template.jinja", "jinja file");
  dir.write("mine.jinja", "given");
  EXPECT_EQ(*chat_template::load(dir.path.string())->render(conversation, true), "jinja file");
  auto given = chat_template::load(dir.path.string(), dir.file("mine.jinja"));
  ASSERT_TRUE(given);
  EXPECT_EQ(*given->render(conversation, true), "given");
  EXPECT_EQ(given->source(), dir.file("mine.jinja"));
}

TEST(ChatTemplate, AListOfNamedTemplatesUsesTheDefaultOne) {
  test::temp_dir dir("kvactor-chat");
  dir.write("tokenizer_config.json",
            config_with(json::array({{{"name", "tool_use"}, {"template", "tools"}},
                                     {{"name", "default"}, {"template", "plain"}}}))
                .dump());
  EXPECT_EQ(*chat_template::load(dir.path.string())->render(conversation, true), "plain");
}

TEST(ChatTemplate, AModelWithoutATemplateSaysToPassOne) {
  test::temp_dir dir("kvactor-chat");
  dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  auto t = chat_template::load(dir.path.string());
  ASSERT_FALSE(t);
  EXPECT_NE(t.err().message.find("pass --chat-template FILE"), std::string::npos)
      << t.err().message;
  EXPECT_FALSE(chat_template::load(dir.path.string(), dir.file("absent.jinja")));
}

TEST(ChatTemplate, AConstructTheInterpreterLacksIsRefusedAtLoadNamingItsLine) {
  test::temp_dir dir("kvactor-chat");
  dir.write("chat_template.jinja", "line one\n{% include 'other.jinja' %}");
  auto t = chat_template::load(dir.path.string());
  ASSERT_FALSE(t);
  EXPECT_NE(t.err().message.find("line 2"), std::string::npos) << t.err().message;
  EXPECT_NE(t.err().message.find("include"), std::string::npos) << t.err().message;
}

TEST(ChatTemplate, ATemplatesRaisedExceptionIsAnErrorWithItsMessage) {
  test::temp_dir dir("kvactor-chat");
  dir.write("chat_template.jinja",
            "{% if messages[0].role != 'system' %}{{ raise_exception('a system message comes "
            "first') }}{% endif %}");
  auto t = chat_template::load(dir.path.string());
  ASSERT_TRUE(t);
  auto text = t->render(conversation, true);
  ASSERT_FALSE(text);
  EXPECT_NE(text.err().message.find("a system message comes first"), std::string::npos)
      << text.err().message;
}

} // namespace
} // namespace kvactor
