// A cursor over a template's tokens, shared by the statement and expression parsers.
#pragma once

#include "model/jinja/ast.hpp"
#include "model/jinja/failure.hpp"
#include "model/jinja/lexer.hpp"

#include <fmt/format.h>

namespace kvactor::jinja {

// Nesting deeper than this (brackets, unary operators, blocks) is refused: the parser recurses.
inline constexpr int max_parse_depth = 128;

struct parse_cursor {
  const std::vector<token>& tokens;
  size_t pos = 0;
  int depth = 0;

  const token& peek(size_t ahead = 0) const {
    return tokens[std::min(pos + ahead, tokens.size() - 1)];
  }
  int line() const { return peek().line; }
  bool at(token_kind kind, std::string_view text = {}, size_t ahead = 0) const {
    const token& t = peek(ahead);
    return t.kind == kind && (text.empty() || t.text == text);
  }
  bool at_op(std::string_view op) const { return at(token_kind::op, op); }
  bool at_name(std::string_view name) const { return at(token_kind::name, name); }
  const token& advance() {
    const token& t = peek();
    if (pos < tokens.size() - 1) ++pos;
    return t;
  }
  bool accept_op(std::string_view op) {
    if (!at_op(op)) return false;
    advance();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op))
      fail(line(), fmt::format("expected '{}', got {}", op, describe()), errc::parse_error);
  }
  std::string expect_name() {
    if (!at(token_kind::name))
      fail(line(), fmt::format("expected a name, got {}", describe()), errc::parse_error);
    return advance().text;
  }
  std::string describe() const {
    const token& t = peek();
    switch (t.kind) {
    case token_kind::end: return "the end of the template";
    case token_kind::block_close: return "'%}'";
    case token_kind::output_close: return "'}}'";
    case token_kind::string: return "a string";
    default: return "'" + t.text + "'";
    }
  }
  void enter() {
    if (++depth > max_parse_depth)
      fail(line(), fmt::format("nesting deeper than {} levels", max_parse_depth),
           errc::parse_error);
  }
  void leave() { --depth; }
};

std::unique_ptr<expr> parse_expression(parse_cursor& c, bool with_condition = true);
// An expression, or several separated by commas (a tuple, held as a list).
std::unique_ptr<expr> parse_tuple(parse_cursor& c, bool with_condition = true);

} // namespace kvactor::jinja
