// Whitespace as transformers configures Jinja2: trim_blocks, lstrip_blocks, '-' and '+' markers.
#include "test_support.hpp"

#include <gtest/gtest.h>

namespace {

using kvactor::jinja::testing_support::render;

TEST(JinjaWhitespace, TrimBlocksDropTheNewlineAfterATag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
}

TEST(JinjaWhitespace, LstripBlocksDropIndentationBeforeATag) {
  EXPECT_EQ(render("a\n    {% if true %}\n    b\n    {% endif %}\nc"), "a\n    b\nc");
}

TEST(JinjaWhitespace, OutputTagsKeepTheirIndentationAndNewline) {
  EXPECT_EQ(render("  {{ 'x' }}\ny"), "  x\ny");
}

TEST(JinjaWhitespace, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render("a  \n\n  {{- 'b' -}}  \n\n  c"), "abc");
  EXPECT_EQ(render("a\n{%- if true -%}\n  b\n{%- endif %}"), "ab");
}

TEST(JinjaWhitespace, PlusKeepsWhatTrimAndLstripWouldRemove) {
  EXPECT_EQ(render("  {%+ if true +%}\nx{% endif %}"), "  \nx");
}

TEST(JinjaWhitespace, OneTrailingNewlineOfTheTemplateIsDropped) {
  EXPECT_EQ(render("x\n"), "x");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("x\r\ny\r\n"), "x\ny");
}

TEST(JinjaWhitespace, CommentsVanishWithTheirLine) {
  EXPECT_EQ(render("a\n  {# note #}\nb"), "a\nb");
  EXPECT_EQ(render("a {#- note -#} b"), "ab");
}

TEST(JinjaWhitespace, LstripOnlyWhenTheTagStartsItsLine) {
  EXPECT_EQ(render("x  {% if true %}y{% endif %}"), "x  y");
}

} // namespace
