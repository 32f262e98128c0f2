// The language, construct by construct, with the answers Python's Jinja2 gives.
#include "test_support.hpp"

#include <gtest/gtest.h>

namespace {

using kvactor::jinja::testing_support::render;
using nlohmann::ordered_json;

TEST(JinjaTemplate, PrintsValuesAsPythonStrDoes) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5, {'k': [2]}] }}"),
            "[1, 'a', None, True, 1.5, {'k': [2]}]");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e-5 }}"),
            "1e+16 1.0 0.30000000000000004 1e-05");
  EXPECT_EQ(render("{{ \"it's\" }} {{ [\"it's\"] }}"), "it's [\"it's\"]");
}

TEST(JinjaTemplate, ArithmeticFollowsPython) {
  EXPECT_EQ(
      render("{{ 3 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 1.0 }}"),
      "1.5 3 -4 2 1024 2.0");
  EXPECT_EQ(render("{{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 ~ 'x' ~ none }}"), "abab [1, 2] 1xNone");
  EXPECT_EQ(render("{{ true + 1 }}"), "2");
}

TEST(JinjaTemplate, TruthinessFollowsPython) {
  EXPECT_EQ(render("{% for v in [0, 1, '', 'a', [], [0], {}, none, 0.0] %}{{ 'T' if v else 'F' }}"
                   "{% endfor %}"),
            "FTFTFTFFF");
  EXPECT_EQ(render("{{ 'T' if missing else 'F' }}"), "F");
}

TEST(JinjaTemplate, ComparisonsChainAndCompareAcrossNumbers) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' in 'cat' }} "
                   "{{ 2 not in [1] }} {{ 'k' in {'k': 1} }}"),
            "True True True True True True");
}

TEST(JinjaTemplate, IfElifElse) {
  const char* tpl = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(render(tpl, {{"x", 1}}), "one");
  EXPECT_EQ(render(tpl, {{"x", 2}}), "two");
  EXPECT_EQ(render(tpl, {{"x", 5}}), "many");
}

TEST(JinjaTemplate, ForLoopExposesLoopVariables) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{{ loop.revindex }}|{% endfor %}"),
            "10TrueFalse33|21FalseFalse32|32FalseTrue31|");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}"),
            "-2,1-3,2-,");
}

TEST(JinjaTemplate, ForLoopFiltersUnpacksAndHasAnElseClause) {
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }} {% endfor %}"),
            "22 42 ");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                   {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1;a=2;");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
}

TEST(JinjaTemplate, BreakAndContinue) {
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 1 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "023");
}

TEST(JinjaTemplate, SetInsideALoopDoesNotLeakButNamespacesDo) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i * 10 %}{% endfor %}{{ x }}"),
            "1");
  EXPECT_EQ(render("{% set ns = namespace(total=0) %}{% for i in [1, 2, 3] %}"
                   "{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}"),
            "6");
}

TEST(JinjaTemplate, BlockSetCapturesRenderedText) {
  EXPECT_EQ(
      render("{% set greeting %}Hello {{ name }}{% endset %}[{{ greeting }}]", {{"name", "Ann"}}),
      "[Hello Ann]");
}

TEST(JinjaTemplate, MacrosTakePositionalKeywordAndDefaultArguments) {
  EXPECT_EQ(render("{% macro tag(name, open='<', close='>') %}{{ open }}{{ name }}{{ close }}"
                   "{% endmacro %}{{ tag('a') }}{{ tag('b', close=']') }}"),
            "<a><b]");
}

TEST(JinjaTemplate, AttributeAndSubscriptAccessReachDictKeys) {
  ordered_json ctx = {{"m", {{"role", "user"}, {"content", "hi"}}}};
  EXPECT_EQ(render("{{ m.role }} {{ m['content'] }} {{ m.get('x', 'dflt') }} {{ m.missing }}", ctx),
            "user hi dflt ");
}

TEST(JinjaTemplate, SlicesAndNegativeIndicesCountCodePoints) {
  EXPECT_EQ(render("{{ [1, 2, 3][::-1] }} {{ [1, 2, 3][1:] }} {{ 'héllo'[1:3] }} {{ 'abc'[-1] }}"),
            "[3, 2, 1] [2, 3] él c");
}

TEST(JinjaTemplate, StringMethods) {
  EXPECT_EQ(render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a\\n'.rstrip() }}|"
                   "{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'abc'.startswith('ab') }}|"
                   "{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aBc'.upper() }}{{ 'aBc'.lower() }}|"
                   "{{ 'hello world'.title() }}|{{ 'aaa'.replace('a', 'b', 2) }}"),
            "a b|axx|a|['a', 'b', '', 'c']|['a', 'b']|True|True|ABCabc|Hello World|bba");
}

TEST(JinjaTemplate, Filters) {
  EXPECT_EQ(
      render("{{ '  x '|trim }}|{{ [1, 2]|length }}|{{ 'ab'|upper }}|{{ 'hELLO'|capitalize }}|"
             "{{ [1, 2]|join(', ') }}|{{ [1, 2]|first }}{{ [1, 2]|last }}|{{ u|default('d') }}|"
             "{{ ''|default('e', true) }}|{{ 3|string }}|{{ '42'|int + 1 }}|{{ 'ab'|list }}|"
             "{{ [1, 2]|reverse|list }}|{{ '<a>'|e }}|{{ '<a>'|safe }}"),
      "x|2|AB|Hello|1, 2|12|d|e|3|43|['a', 'b']|[2, 1]|&lt;a&gt;|<a>");
  EXPECT_EQ(render("{{ m|selectattr('role', 'equalto', 'user')|map(attribute='c')|list }} "
                   "{{ m|rejectattr('role', 'equalto', 'user')|list|length }} "
                   "{{ ['a', 'b', 'c']|reject('equalto', 'b')|join }}",
                   {{"m", ordered_json::array(
                              {{{"role", "user"}, {"c", 1}}, {{"role", "bot"}, {"c", 2}}})}}),
            "[1] 1 ac");
}

TEST(JinjaTemplate, TojsonMatchesTransformersJsonDumps) {
  ordered_json ctx = {{"x", {{"b", ordered_json::array({1, 2.0, "é\"\n"})}, {"a", nullptr}}}};
  EXPECT_EQ(render("{{ x|tojson }}", ctx), "{\"b\": [1, 2.0, \"é\\\"\\n\"], \"a\": null}");
  EXPECT_EQ(render("{{ x|tojson(indent=2) }}", ctx),
            "{\n  \"b\": [\n    1,\n    2.0,\n    \"é\\\"\\n\"\n  ],\n  \"a\": null\n}");
  EXPECT_EQ(render("{{ {'a': 1}|tojson(separators=(',', ':')) }} {{ {'b': 1, 'a': "
                   "2}|tojson(sort_keys=true) }}"),
            "{\"a\":1} {\"a\": 2, \"b\": 1}");
}

TEST(JinjaTemplate, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}"
                   "{{ {} is mapping }}{{ [] is iterable }}{{ [] is sequence }}{{ 1 is number }}"
                   "{{ true is boolean }}{{ true is true }}{{ 0 is false }}{{ 1 is not string }}",
                   {{"x", 1}}),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrue");
}

TEST(JinjaTemplate, LiteralsAndEscapes) {
  EXPECT_EQ(
      render("{{ 'a\\tb\\u00e9\\x41' }}{{ \"q\\\"\" }}{{ True }}{{ None }}{{ {'k': 'v'}['k'] }}"),
      "a\tbéAq\"TrueNonev");
}

TEST(JinjaTemplate, StrftimeNowAndRaiseExceptionAreGlobals) {
  EXPECT_EQ(render("{{ strftime_now is defined }}{{ raise_exception is defined }}"), "TrueTrue");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
}

} // namespace
