// Template text -> tokens, with Jinja2's whitespace rules as transformers configures them
// (trim_blocks, lstrip_blocks, '-'/'+' markers, one trailing newline dropped).
#pragma once

#include "messages/errc.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace kvactor::jinja {

enum class token_kind : uint8_t {
  text,        // literal template text
  output_open, // {{
  output_close,
  block_open, // {%
  block_close,
  name,
  string, // already unescaped
  integer,
  floating,
  op, // operator or punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  end,
};

struct token {
  token_kind kind;
  std::string text;
  int line;
};

// The whole template's tokens, ending with one token_kind::end. Comments are dropped. Fails on an
// unterminated tag, comment or string, or a character no Jinja2 token starts with.
expected<std::vector<token>> lex(std::string_view source);

} // namespace kvactor::jinja
