// Runs a parsed template: statements (render.cpp) and expressions (eval.cpp) over a scope stack.
#pragma once

#include "model/jinja/ast.hpp"
#include "model/jinja/failure.hpp"

#include <string>
#include <unordered_map>
#include <vector>

namespace kvactor::jinja {

// Bounds that keep a hostile template from running forever or exhausting memory.
struct render_limits {
  int max_call_depth = 64;             // nested macro calls
  int64_t max_steps = 10'000'000;      // loop iterations and statements, all together
  size_t max_output_bytes = 64u << 20; // the rendered text
};

class renderer {
public:
  renderer(value_dict globals, render_limits limits);

  // Renders `body`; REQUIRES: the nodes outlive the renderer (macros point into them).
  std::string run(const node_list& body);

  value eval(const expr& e);

private:
  enum class flow : uint8_t { normal, broke, continued };
  using scope = std::unordered_map<std::string, value>;

  flow exec(const node_list& body, std::string& out);
  flow exec_node(const node& n, std::string& out);
  flow exec_if(const node& n, std::string& out);
  flow exec_for(const node& n, std::string& out);
  void exec_set_attr(const node& n);
  void define_macro(const node& n);
  value call_macro(const node& n, call_args& args);
  void step(int line);
  void emit(std::string& out, std::string_view text, int line);

  value lookup(const expr& e) const;
  value eval_attribute(const expr& e);
  value eval_subscript(const expr& e);
  value eval_slice(const expr& e);
  value eval_call(const expr& e);
  value eval_filter(const expr& e);
  value eval_test(const expr& e);
  value eval_binary(const expr& e);
  value eval_compare(const expr& e);
  value eval_literal_list(const expr& e);
  value eval_literal_dict(const expr& e);
  call_args eval_args(const expr& e, size_t first);

  std::vector<scope> scopes_;
  render_limits limits_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
};

// obj.name as Jinja2's sandbox resolves it: a method of str/dict, else a dict key (undefined when
// absent). Fails on an undefined obj.
value get_attribute(const value& obj, const std::string& name, int line);
// obj[key]: list/str index, dict key, falling back to attributes as Jinja2 does.
value get_item(const value& obj, const value& key, int line);
// A bound method of a str, dict or list (methods.cpp); undefined when there is none.
value find_method(const value& obj, const std::string& name);

// Filters and tests by name (filters.cpp, tests.cpp); REQUIRES: has_filter/has_test(name).
value apply_filter(const std::string& name, const value& subject, call_args& args, int line);
bool apply_test(const std::string& name, const value& subject, call_args& args, int line);

// The functions every template sees (builtins.cpp): raise_exception, strftime_now, namespace,
// range, dict.
void add_builtins(value_dict& globals);

// Python's json.dumps(x, ensure_ascii=False, indent=indent, separators=..., sort_keys=...) as
// transformers' tojson calls it; indent < 0 means None.
std::string dump_json(const value& v, int indent, const std::string& item_separator,
                      const std::string& key_separator, bool sort_keys, int line);

// Keyword argument `name`, else positional `index`, else null.
const value* find_arg(const call_args& args, size_t index, std::string_view name);

} // namespace kvactor::jinja
