// The parsed template: statements (nodes) holding expressions.
#pragma once

#include "model/jinja/value.hpp"

#include <memory>
#include <string>
#include <vector>

namespace kvactor::jinja {

enum class expr_kind : uint8_t {
  literal,     // value
  name,        // name
  attribute,   // children[0].name
  subscript,   // children[0][children[1]]
  slice,       // children[0][children[1]:children[2]:children[3]], absent parts null
  call,        // children[0](children[1..]); the last keywords.size() are keyword arguments
  filter,      // children[0] | name(children[1..]), keywords as for call
  test,        // children[0] is [not] name(children[1..])
  negate,      // -children[0]
  logical_not, // not children[0]
  logical_and,
  logical_or,
  binary,      // children[0] name children[1], name one of + - * / // % ** ~
  compare,     // children[0] ops[0] children[1] ops[1] children[2] ...
  conditional, // children[1] if children[0] else children[2] (absent: undefined)
  list,        // [children...] (tuples too)
  dict,        // {children[0]: children[1], ...}
};

struct expr {
  expr_kind kind = expr_kind::literal;
  int line = 0;
  std::string name;
  value literal;
  bool negated = false;
  std::vector<std::unique_ptr<expr>> children;
  std::vector<std::string> keywords;
  std::vector<std::string> ops;
};

struct node;
using node_list = std::vector<std::unique_ptr<node>>;

enum class node_kind : uint8_t {
  text,      // name holds the text
  output,    // {{ exprs[0] }}
  if_chain,  // exprs[i] guards bodies[i]; an extra body is the else branch
  for_loop,  // targets in exprs[0] [if exprs[1]]: bodies[0], else bodies[1]
  set,       // targets[0] = exprs[0]
  set_attr,  // targets[0].name = exprs[0]
  set_block, // targets[0] = rendered bodies[0]
  loop_break,
  loop_continue,
  macro, // name(targets with defaults exprs, null where none): bodies[0]
};

struct node {
  node_kind kind = node_kind::text;
  int line = 0;
  std::string name;
  std::vector<std::string> targets;
  std::vector<std::unique_ptr<expr>> exprs;
  std::vector<node_list> bodies;
};

} // namespace kvactor::jinja
