// Errors: syntax, refused constructs, Jinja2's undefined rules, raise_exception, hostile input.
#include "test_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using kvactor::jinja::compiled_template;
using kvactor::jinja::testing_support::render;
using testing::HasSubstr;
using testing::StartsWith;

TEST(JinjaErrors, SyntaxErrorsNameTheirLine) {
  EXPECT_THAT(render("a\nb\n{% if x %}\nno end"), StartsWith("ERROR: line 4: unexpected end"));
  EXPECT_THAT(render("line1\n{{ 1 + }}"), StartsWith("ERROR: line 2: unexpected"));
  EXPECT_THAT(render("{% endif %}"), HasSubstr("unknown tag 'endif'"));
}

TEST(JinjaErrors, UnsupportedConstructsAreRefusedAtParseTime) {
  auto tpl = compiled_template::parse("ok\n\n{% include 'x.jinja' %}");
  ASSERT_FALSE(tpl);
  EXPECT_EQ(tpl.err().code, kvactor::errc::unsupported);
  EXPECT_EQ(tpl.err().message, "line 3: unsupported tag 'include'");
  EXPECT_THAT(render("{% extends 'base' %}"), HasSubstr("unsupported tag 'extends'"));
  EXPECT_THAT(render("{% filter upper %}x{% endfilter %}"), HasSubstr("unsupported tag 'filter'"));
  EXPECT_THAT(render("{{ x|nosuchfilter }}"),
              HasSubstr("line 1: unsupported filter 'nosuchfilter'"));
  EXPECT_THAT(render("{{ x is nosuchtest }}"), HasSubstr("unsupported test 'nosuchtest'"));
  EXPECT_THAT(render("{% do x %}"), HasSubstr("unsupported tag 'do'"));
}

TEST(JinjaErrors, UndefinedIsLenientUntilUsedAsAnObject) {
  EXPECT_EQ(render("[{{ missing }}][{{ missing|length }}][{{ missing|trim }}]"), "[][0][]");
  EXPECT_EQ(render("{{ d.none_such }}", {{"d", nlohmann::ordered_json::object()}}), "");
  EXPECT_THAT(render("{{ missing.attr }}"), HasSubstr("'missing' is undefined"));
  EXPECT_THAT(render("{{ d.x.y }}", {{"d", nlohmann::ordered_json::object()}}),
              HasSubstr("has no attribute 'x'"));
  EXPECT_THAT(render("{{ missing + 'a' }}"), HasSubstr("'missing' is undefined"));
}

TEST(JinjaErrors, RaiseExceptionFailsTheRenderWithItsMessageAndLine) {
  EXPECT_EQ(render("\n{{ raise_exception('roles must alternate') }}"),
            "ERROR: line 2: roles must alternate");
}

TEST(JinjaErrors, TypeErrorsAreErrors) {
  EXPECT_THAT(render("{{ 'a' + 1 }}"), HasSubstr("can only concatenate str"));
  EXPECT_THAT(render("{{ 1 / 0 }}"), HasSubstr("division by zero"));
  EXPECT_THAT(render("{{ [1] < 'a' }}"), HasSubstr("not supported"));
  EXPECT_THAT(render("{% set x = 1 %}{% set x.y = 2 %}"), HasSubstr("non-namespace"));
  EXPECT_THAT(render("{{ [1].append(2) }}"), HasSubstr("immutable"));
}

TEST(JinjaErrors, UnterminatedTagsAreSyntaxErrors) {
  EXPECT_THAT(render("{{ x "), HasSubstr("unterminated"));
  EXPECT_THAT(render("{% if x"), HasSubstr("unterminated"));
  EXPECT_THAT(render("{# comment"), HasSubstr("unterminated comment"));
  EXPECT_THAT(render("{{ 'abc }}"), HasSubstr("unterminated string"));
  EXPECT_THAT(render("{{ (1 }}"), HasSubstr("unexpected '}'"));
}

TEST(JinjaErrors, DeepNestingIsRefusedNotRecursedInto) {
  std::string deep(10000, '(');
  EXPECT_THAT(render("{{ " + deep + "1" + std::string(10000, ')') + " }}"), HasSubstr("nesting"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i)
    ifs += "{% if true %}";
  EXPECT_THAT(render(ifs), HasSubstr("nesting"));
  EXPECT_THAT(render("{{ " + std::string(5000, '-') + "1 }}"), HasSubstr("nesting"));
}

TEST(JinjaErrors, HugeLoopsAndOutputsStopWithAnError) {
  EXPECT_THAT(render("{% for i in range(1000000) %}{% endfor %}"), HasSubstr("range too big"));
  EXPECT_THAT(render("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}"
                     "{% endfor %}"),
              HasSubstr("steps"));
  EXPECT_THAT(render("{{ 'x' * 100000000000 }}"), HasSubstr("exceed"));
  EXPECT_THAT(render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"), HasSubstr("deeper"));
}

TEST(JinjaErrors, GarbageInputNeverCrashes) {
  const char* inputs[] = {"{{",
                          "{%",
                          "{#",
                          "}}",
                          "{{}}",
                          "{% %}",
                          "{{ ] }}",
                          "{{ 'a' 'b' }}",
                          "{% for %}",
                          "{% for x in %}",
                          "{% set %}",
                          "{{ a.. }}",
                          "{{ a[ }}",
                          "{% macro %}",
                          "{{ \"\\u12\" }}",
                          "{% if %}{% endif %}",
                          "\xff\xfe{{ 1 }}"};
  for (const char* in : inputs)
    EXPECT_NO_THROW((void)render(in)) << in;
}

} // namespace
