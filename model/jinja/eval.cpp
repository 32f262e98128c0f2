// Expressions: names, attribute and item access, slices, calls, filters, tests, operators.
#include "model/jinja/renderer.hpp"

#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

[[noreturn]] void fail_undefined(const value& v, int line) {
  fail(line, v.text.empty() ? "undefined value" : v.text);
}

// Python's slice.indices(): clamps start/stop for a sequence of length n.
std::vector<size_t> slice_positions(const value* start, const value* stop, const value* stride,
                                    int64_t n, int line) {
  auto as_int = [line](const value* v, int64_t fallback) {
    if (!v || v->type == kind::none || v->is_undefined()) return fallback;
    if (v->type != kind::integer && v->type != kind::boolean)
      fail(line, "slice indices must be integers or None");
    return v->type == kind::boolean ? int64_t{v->boolean} : v->integer;
  };
  int64_t step = as_int(stride, 1);
  if (step == 0) fail(line, "slice step cannot be zero");
  auto clamp = [&](int64_t i, int64_t low, int64_t high) {
    if (i < 0) i += n;
    return std::clamp(i, low, high);
  };
  int64_t first = step > 0 ? clamp(as_int(start, 0), 0, n) : clamp(as_int(start, n - 1), -1, n - 1);
  int64_t last = step > 0 ? clamp(as_int(stop, n), 0, n) : clamp(as_int(stop, -n - 1), -1, n - 1);
  std::vector<size_t> out;
  for (int64_t i = first; step > 0 ? i < last : i > last; i += step)
    out.push_back(static_cast<size_t>(i));
  return out;
}

bool contains(const value& container, const value& item, int line) {
  switch (container.type) {
  case kind::undefined: return false;
  case kind::string:
    if (item.type != kind::string)
      fail(line,
           fmt::format("'in <string>' requires string as left operand, not {}", type_name(item)));
    return container.text.find(item.text) != std::string::npos;
  case kind::list:
    for (const auto& v : *container.items)
      if (equals(v, item)) return true;
    return false;
  case kind::dict:
  case kind::ns: return item.type == kind::string && container.find(item.text) != nullptr;
  default: fail(line, fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }
}

bool compare(const std::string& op, const value& a, const value& b, int line) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a, line);
  if (op == "not in") return !contains(b, a, line);
  if (a.is_undefined()) fail_undefined(a, line);
  if (b.is_undefined()) fail_undefined(b, line);
  if (op == "<") return unwrap(less(a, b), line);
  if (op == ">") return unwrap(less(b, a), line);
  if (op == "<=") return !unwrap(less(b, a), line);
  return !unwrap(less(a, b), line); // >=
}

} // namespace

value renderer::eval(const expr& e) {
  switch (e.kind) {
  case expr_kind::literal: return e.literal;
  case expr_kind::name: return lookup(e);
  case expr_kind::attribute: return get_attribute(eval(*e.children[0]), e.name, e.line);
  case expr_kind::subscript: return eval_subscript(e);
  case expr_kind::slice: return eval_slice(e);
  case expr_kind::call: return eval_call(e);
  case expr_kind::filter: return eval_filter(e);
  case expr_kind::test: return value::from(eval_test(e).boolean);
  case expr_kind::negate: {
    value v = eval(*e.children[0]);
    if (v.type == kind::integer || v.type == kind::boolean)
      return value::from(-(v.type == kind::boolean ? int64_t{v.boolean} : v.integer));
    if (v.type == kind::floating) return value::from(-v.floating);
    if (v.is_undefined()) fail_undefined(v, e.line);
    fail(e.line, fmt::format("bad operand type for unary -: '{}'", type_name(v)));
  }
  case expr_kind::logical_not: return value::from(!truthy(eval(*e.children[0])));
  case expr_kind::logical_and: {
    value a = eval(*e.children[0]);
    return truthy(a) ? eval(*e.children[1]) : a;
  }
  case expr_kind::logical_or: {
    value a = eval(*e.children[0]);
    return truthy(a) ? a : eval(*e.children[1]);
  }
  case expr_kind::binary: return eval_binary(e);
  case expr_kind::compare: return eval_compare(e);
  case expr_kind::conditional:
    if (truthy(eval(*e.children[0]))) return eval(*e.children[1]);
    return e.children[2] ? eval(*e.children[2]) : value::undefined("the conditional had no else");
  case expr_kind::list: return eval_literal_list(e);
  case expr_kind::dict: return eval_literal_dict(e);
  }
  return value::undefined();
}

value renderer::lookup(const expr& e) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(e.name);
    if (found != it->end()) return found->second;
  }
  return value::undefined(fmt::format("'{}' is undefined", e.name));
}

value get_attribute(const value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) fail_undefined(obj, line);
  if (obj.type == kind::dict || obj.type == kind::string || obj.type == kind::list) {
    value method = find_method(obj, name);
    if (!method.is_undefined()) return method;
  }
  if (obj.type == kind::dict || obj.type == kind::ns)
    if (const value* v = obj.find(name)) return *v;
  return value::undefined(fmt::format("'{}' has no attribute '{}'", type_name(obj), name));
}

value get_item(const value& obj, const value& key, int line) {
  if (obj.is_undefined()) fail_undefined(obj, line);
  bool int_key = key.type == kind::integer || key.type == kind::boolean;
  int64_t index = key.type == kind::boolean ? int64_t{key.boolean} : key.integer;
  if ((obj.type == kind::dict || obj.type == kind::ns) && key.type == kind::string)
    if (const value* v = obj.find(key.text)) return *v;
  if (obj.type == kind::list && int_key) {
    auto n = static_cast<int64_t>(obj.items->size());
    int64_t i = index < 0 ? index + n : index;
    if (i >= 0 && i < n) return (*obj.items)[static_cast<size_t>(i)];
    return value::undefined(fmt::format("list object has no element {}", index));
  }
  if (obj.type == kind::string && int_key) {
    auto cps = code_points(obj.text);
    auto n = static_cast<int64_t>(cps.size());
    int64_t i = index < 0 ? index + n : index;
    if (i >= 0 && i < n) return value::from(std::string(cps[static_cast<size_t>(i)]));
    return value::undefined(fmt::format("str object has no element {}", index));
  }
  if (key.type == kind::string) return get_attribute(obj, key.text, line);
  return value::undefined(fmt::format("'{}' has no item {}", type_name(obj), to_repr(key)));
}

value renderer::eval_subscript(const expr& e) {
  value obj = eval(*e.children[0]);
  return get_item(obj, eval(*e.children[1]), e.line);
}

value renderer::eval_slice(const expr& e) {
  value obj = eval(*e.children[0]);
  value parts[3];
  for (int i = 0; i < 3; ++i)
    if (e.children[i + 1]) parts[i] = eval(*e.children[i + 1]);
  if (obj.is_undefined()) fail_undefined(obj, e.line);
  if (obj.type == kind::list) {
    value_list out;
    for (size_t i : slice_positions(&parts[0], &parts[1], &parts[2],
                                    static_cast<int64_t>(obj.items->size()), e.line))
      out.push_back((*obj.items)[i]);
    return value::list(std::move(out));
  }
  if (obj.type == kind::string) {
    auto cps = code_points(obj.text);
    std::string out;
    for (size_t i :
         slice_positions(&parts[0], &parts[1], &parts[2], static_cast<int64_t>(cps.size()), e.line))
      out += cps[i];
    return value::from(std::move(out));
  }
  fail(e.line, fmt::format("'{}' is not subscriptable", type_name(obj)));
}

call_args renderer::eval_args(const expr& e, size_t first) {
  call_args args;
  size_t keyword_start = e.children.size() - e.keywords.size();
  for (size_t i = first; i < e.children.size(); ++i) {
    value v = eval(*e.children[i]);
    if (i < keyword_start)
      args.positional.push_back(std::move(v));
    else
      args.keyword.emplace_back(e.keywords[i - keyword_start], std::move(v));
  }
  return args;
}

value renderer::eval_call(const expr& e) {
  value callee = eval(*e.children[0]);
  if (callee.is_undefined()) fail_undefined(callee, e.line);
  if (callee.type != kind::function)
    fail(e.line, fmt::format("'{}' is not callable", type_name(callee)));
  call_args args = eval_args(e, 1);
  if (++call_depth_ > limits_.max_call_depth)
    fail(e.line, fmt::format("calls nested deeper than {}", limits_.max_call_depth));
  value result = unwrap((*callee.call)(args), e.line);
  --call_depth_;
  return result;
}

value renderer::eval_filter(const expr& e) {
  value subject = eval(*e.children[0]);
  call_args args = eval_args(e, 1);
  return apply_filter(e.name, subject, args, e.line);
}

value renderer::eval_test(const expr& e) {
  value subject = eval(*e.children[0]);
  call_args args = eval_args(e, 1);
  return value::from(apply_test(e.name, subject, args, e.line) != e.negated);
}

value renderer::eval_compare(const expr& e) {
  value left = eval(*e.children[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    value right = eval(*e.children[i + 1]);
    if (!compare(e.ops[i], left, right, e.line)) return value::from(false);
    left = std::move(right);
  }
  return value::from(true);
}

value renderer::eval_literal_list(const expr& e) {
  value_list items;
  for (const auto& child : e.children)
    items.push_back(eval(*child));
  return value::list(std::move(items));
}

value renderer::eval_literal_dict(const expr& e) {
  value result = value::dict({});
  for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
    value key = eval(*e.children[i]);
    value v = eval(*e.children[i + 1]);
    std::string name = key.type == kind::string ? key.text : to_repr(key);
    if (value* slot = result.find(name))
      *slot = std::move(v);
    else
      result.entries->emplace_back(std::move(name), std::move(v));
  }
  return result;
}

} // namespace kvactor::jinja
