// Tokens -> the template's statements. Refuses, with the construct's name and line, every tag,
// filter and test the interpreter lacks (extends, include, import, filter blocks, ...).
#pragma once

#include "model/jinja/ast.hpp"
#include "model/jinja/lexer.hpp"

namespace kvactor::jinja {

// The template body; a syntax error or an unsupported construct names its line.
expected<node_list> parse_tokens(const std::vector<token>& tokens);

// Whether the interpreter knows a filter or test of that name (filters.cpp).
bool has_filter(std::string_view name);
bool has_test(std::string_view name);

} // namespace kvactor::jinja
