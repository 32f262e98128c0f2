// Expressions, by Jinja2's precedence: conditional < or < and < not < comparisons < + - < ~ <
// * / // % < ** < unary minus < filters, tests and postfix (. [] ()).
#include "model/jinja/parse_cursor.hpp"
#include "model/jinja/parser.hpp"

#include <charconv>

namespace kvactor::jinja {
namespace {

using expr_ptr = std::unique_ptr<expr>;

expr_ptr make(expr_kind kind, int line) {
  auto e = std::make_unique<expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

expr_ptr make_binary(expr_kind kind, std::string op, expr_ptr lhs, expr_ptr rhs) {
  auto e = make(kind, lhs->line);
  e->name = std::move(op);
  e->children.push_back(std::move(lhs));
  e->children.push_back(std::move(rhs));
  return e;
}

expr_ptr parse_or(parse_cursor& c);
expr_ptr parse_unary(parse_cursor& c, bool with_filter);

// Arguments after '(': positional, then name=value keywords.
void parse_call_args(parse_cursor& c, expr& target) {
  c.expect_op("(");
  bool first = true;
  while (!c.accept_op(")")) {
    if (!first) {
      c.expect_op(",");
      if (c.accept_op(")")) return;
    }
    first = false;
    if (c.at(token_kind::name) && c.at(token_kind::op, "=", 1)) {
      target.keywords.push_back(c.advance().text);
      c.advance();
    } else if (!target.keywords.empty()) {
      fail(c.line(), "positional argument after a keyword argument", errc::parse_error);
    }
    if (c.at_op("*") || c.at_op("**"))
      fail(c.line(), "unsupported: '*args' and '**kwargs' in calls", errc::unsupported);
    target.children.push_back(parse_expression(c));
  }
}

expr_ptr parse_literal_name(parse_cursor& c) {
  const token& t = c.advance();
  auto e = make(expr_kind::literal, t.line);
  if (t.text == "true" || t.text == "True")
    e->literal = value::from(true);
  else if (t.text == "false" || t.text == "False")
    e->literal = value::from(false);
  else if (t.text == "none" || t.text == "None")
    e->literal = value::none();
  else {
    e->kind = expr_kind::name;
    e->name = t.text;
  }
  return e;
}

expr_ptr parse_number(parse_cursor& c) {
  const token& t = c.advance();
  auto e = make(expr_kind::literal, t.line);
  if (t.kind == token_kind::floating) {
    e->literal = value::from(std::stod(t.text));
    return e;
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (ec != std::errc()) fail(t.line, "integer literal out of range: " + t.text);
  e->literal = value::from(v);
  return e;
}

expr_ptr parse_list_literal(parse_cursor& c, const char* close) {
  auto e = make(expr_kind::list, c.line());
  while (!c.accept_op(close)) {
    if (!e->children.empty()) {
      c.expect_op(",");
      if (c.accept_op(close)) break;
    }
    e->children.push_back(parse_expression(c));
  }
  return e;
}

expr_ptr parse_dict_literal(parse_cursor& c) {
  auto e = make(expr_kind::dict, c.line());
  while (!c.accept_op("}")) {
    if (!e->children.empty()) {
      c.expect_op(",");
      if (c.accept_op("}")) break;
    }
    e->children.push_back(parse_expression(c));
    c.expect_op(":");
    e->children.push_back(parse_expression(c));
  }
  return e;
}

expr_ptr parse_parenthesized(parse_cursor& c) {
  int line = c.line();
  if (c.accept_op(")")) return make(expr_kind::list, line);
  auto first = parse_expression(c);
  if (c.accept_op(")")) return first;
  auto tuple = make(expr_kind::list, line);
  tuple->children.push_back(std::move(first));
  while (c.accept_op(",") && !c.at_op(")"))
    tuple->children.push_back(parse_expression(c));
  c.expect_op(")");
  return tuple;
}

expr_ptr parse_primary(parse_cursor& c) {
  const token& t = c.peek();
  if (t.kind == token_kind::name) return parse_literal_name(c);
  if (t.kind == token_kind::integer || t.kind == token_kind::floating) return parse_number(c);
  if (t.kind == token_kind::string) {
    auto e = make(expr_kind::literal, t.line);
    std::string s;
    while (c.at(token_kind::string))
      s += c.advance().text; // adjacent literals concatenate, as in Python
    e->literal = value::from(std::move(s));
    return e;
  }
  if (c.accept_op("(")) return parse_parenthesized(c);
  if (c.accept_op("[")) return parse_list_literal(c, "]");
  if (c.accept_op("{")) return parse_dict_literal(c);
  fail(t.line, fmt::format("unexpected {}", c.describe()), errc::parse_error);
}

// `callee(...)`: a call whose arguments follow.
expr_ptr parse_call(parse_cursor& c, expr_ptr callee) {
  auto call = make(expr_kind::call, c.line());
  call->children.push_back(std::move(callee));
  parse_call_args(c, *call);
  return call;
}

expr_ptr parse_subscript(parse_cursor& c, expr_ptr target) {
  int line = c.line();
  expr_ptr parts[3];
  if (!c.at_op(":")) parts[0] = parse_expression(c);
  if (!c.accept_op(":")) {
    c.expect_op("]");
    auto e = make_binary(expr_kind::subscript, "", std::move(target), std::move(parts[0]));
    e->line = line;
    return e;
  }
  if (!c.at_op(":") && !c.at_op("]")) parts[1] = parse_expression(c);
  if (c.accept_op(":") && !c.at_op("]")) parts[2] = parse_expression(c);
  c.expect_op("]");
  auto e = make(expr_kind::slice, line);
  e->children.push_back(std::move(target));
  for (auto& p : parts)
    e->children.push_back(std::move(p));
  return e;
}

expr_ptr parse_postfix(parse_cursor& c, expr_ptr e) {
  while (true) {
    if (c.accept_op(".")) {
      if (c.at(token_kind::integer)) {
        auto index = parse_number(c);
        e = make_binary(expr_kind::subscript, "", std::move(e), std::move(index));
        continue;
      }
      auto attr = make(expr_kind::attribute, c.line());
      attr->name = c.expect_name();
      attr->children.push_back(std::move(e));
      e = std::move(attr);
    } else if (c.accept_op("[")) {
      e = parse_subscript(c, std::move(e));
    } else if (c.at_op("(")) {
      e = parse_call(c, std::move(e));
    } else {
      return e;
    }
  }
}

expr_ptr parse_filter(parse_cursor& c, expr_ptr subject) {
  auto e = make(expr_kind::filter, c.line());
  e->name = c.expect_name();
  while (c.accept_op("."))
    e->name += "." + c.expect_name();
  if (!has_filter(e->name))
    fail(e->line, fmt::format("unsupported filter '{}'", e->name), errc::unsupported);
  e->children.push_back(std::move(subject));
  if (c.at_op("(")) parse_call_args(c, *e);
  return e;
}

bool starts_test_argument(const parse_cursor& c) {
  const token& t = c.peek();
  if (t.kind == token_kind::name)
    return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if";
  return t.kind == token_kind::string || t.kind == token_kind::integer
         || t.kind == token_kind::floating || c.at_op("[") || c.at_op("{");
}

expr_ptr parse_test(parse_cursor& c, expr_ptr subject) {
  auto e = make(expr_kind::test, c.line());
  e->negated = c.accept_name("not");
  e->name = c.expect_name();
  if (!has_test(e->name))
    fail(e->line, fmt::format("unsupported test '{}'", e->name), errc::unsupported);
  e->children.push_back(std::move(subject));
  if (c.at_op("("))
    parse_call_args(c, *e);
  else if (starts_test_argument(c))
    e->children.push_back(parse_postfix(c, parse_primary(c)));
  return e;
}

expr_ptr parse_filters_and_tests(parse_cursor& c, expr_ptr e) {
  while (true) {
    if (c.accept_op("|")) {
      e = parse_filter(c, std::move(e));
    } else if (c.accept_name("is")) {
      e = parse_test(c, std::move(e));
    } else if (c.at_op("(")) {
      e = parse_call(c, std::move(e));
    } else {
      return e;
    }
  }
}

expr_ptr parse_unary(parse_cursor& c, bool with_filter) {
  c.enter();
  expr_ptr e;
  int line = c.line();
  if (c.accept_op("-") || c.accept_op("+")) {
    bool minus = c.tokens[c.pos - 1].text == "-";
    auto operand = parse_unary(c, false);
    if (minus) {
      e = make(expr_kind::negate, line);
      e->children.push_back(std::move(operand));
    } else {
      e = std::move(operand);
    }
  } else {
    e = parse_postfix(c, parse_primary(c));
  }
  if (with_filter) e = parse_filters_and_tests(c, std::move(e));
  c.leave();
  return e;
}

expr_ptr parse_power(parse_cursor& c) {
  auto e = parse_unary(c, true);
  while (c.accept_op("**"))
    e = make_binary(expr_kind::binary, "**", std::move(e), parse_unary(c, true));
  return e;
}

// One left-associative level: operands from `next`, joined by any of `ops`.
template <class Next>
expr_ptr parse_level(parse_cursor& c, std::initializer_list<const char*> ops, Next next) {
  auto e = next(c);
  while (true) {
    const char* matched = nullptr;
    for (const char* op : ops)
      if (c.at_op(op)) matched = op;
    if (!matched) return e;
    c.advance();
    e = make_binary(expr_kind::binary, matched, std::move(e), next(c));
  }
}

expr_ptr parse_product(parse_cursor& c) {
  return parse_level(c, {"*", "/", "//", "%"}, parse_power);
}
expr_ptr parse_concat(parse_cursor& c) {
  return parse_level(c, {"~"}, parse_product);
}
expr_ptr parse_sum(parse_cursor& c) {
  return parse_level(c, {"+", "-"}, parse_concat);
}

// A comparison operator at the cursor ("not in" included), consumed; "" when none.
std::string accept_comparison(parse_cursor& c) {
  for (const char* op : {"==", "!=", "<", "<=", ">", ">="})
    if (c.accept_op(op)) return op;
  if (c.accept_name("in")) return "in";
  if (c.at_name("not") && c.at(token_kind::name, "in", 1)) {
    c.advance();
    c.advance();
    return "not in";
  }
  return "";
}

expr_ptr parse_compare(parse_cursor& c) {
  auto first = parse_sum(c);
  std::string op = accept_comparison(c);
  if (op.empty()) return first;
  auto e = make(expr_kind::compare, first->line);
  e->children.push_back(std::move(first));
  for (; !op.empty(); op = accept_comparison(c)) {
    e->ops.push_back(op);
    e->children.push_back(parse_sum(c));
  }
  return e;
}

expr_ptr parse_not(parse_cursor& c) {
  if (!c.at_name("not")) return parse_compare(c);
  c.enter();
  auto e = make(expr_kind::logical_not, c.advance().line);
  e->children.push_back(parse_not(c));
  c.leave();
  return e;
}

expr_ptr parse_and(parse_cursor& c) {
  auto e = parse_not(c);
  while (c.accept_name("and"))
    e = make_binary(expr_kind::logical_and, "and", std::move(e), parse_not(c));
  return e;
}

expr_ptr parse_or(parse_cursor& c) {
  auto e = parse_and(c);
  while (c.accept_name("or"))
    e = make_binary(expr_kind::logical_or, "or", std::move(e), parse_and(c));
  return e;
}

} // namespace

std::unique_ptr<expr> parse_expression(parse_cursor& c, bool with_condition) {
  c.enter();
  auto e = parse_or(c);
  while (with_condition && c.accept_name("if")) {
    auto cond = make(expr_kind::conditional, e->line);
    cond->children.push_back(parse_or(c));
    cond->children.push_back(std::move(e));
    cond->children.push_back(c.accept_name("else") ? parse_expression(c) : nullptr);
    e = std::move(cond);
  }
  c.leave();
  return e;
}

std::unique_ptr<expr> parse_tuple(parse_cursor& c, bool with_condition) {
  auto first = parse_expression(c, with_condition);
  if (!c.at_op(",")) return first;
  auto tuple = make(expr_kind::list, first->line);
  tuple->children.push_back(std::move(first));
  while (c.accept_op(",")) {
    if (c.at(token_kind::block_close) || c.at(token_kind::output_close)) break;
    tuple->children.push_back(parse_expression(c, with_condition));
  }
  return tuple;
}

} // namespace kvactor::jinja
