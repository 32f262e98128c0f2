// Jinja2's tests (`x is defined`, `x is string`, `x is equalto y`, ...), with Python's type rules:
// bool is a number, undefined is iterable and a sequence (it has __iter__ and __len__).
#include "model/jinja/parser.hpp"
#include "model/jinja/renderer.hpp"

#include <cmath>
#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

using test = bool (*)(const value& v, const value* arg, int line);

bool t_defined(const value& v, const value*, int) {
  return !v.is_undefined();
}
bool t_undefined(const value& v, const value*, int) {
  return v.is_undefined();
}
bool t_none(const value& v, const value*, int) {
  return v.type == kind::none;
}
bool t_string(const value& v, const value*, int) {
  return v.type == kind::string;
}
bool t_mapping(const value& v, const value*, int) {
  return v.type == kind::dict;
}
bool t_iterable(const value& v, const value*, int) {
  return v.type == kind::string || v.type == kind::list || v.type == kind::dict || v.is_undefined();
}
bool t_number(const value& v, const value*, int) {
  return v.is_number();
}
bool t_integer(const value& v, const value*, int) {
  return v.type == kind::integer;
}
bool t_float(const value& v, const value*, int) {
  return v.type == kind::floating;
}
bool t_boolean(const value& v, const value*, int) {
  return v.type == kind::boolean;
}
bool t_true(const value& v, const value*, int) {
  return v.type == kind::boolean && v.boolean;
}
bool t_false(const value& v, const value*, int) {
  return v.type == kind::boolean && !v.boolean;
}
bool t_callable(const value& v, const value*, int) {
  return v.type == kind::function;
}

const value& need(const value* arg, int line) {
  if (!arg) fail(line, "the test needs an argument");
  return *arg;
}
bool t_equalto(const value& v, const value* arg, int line) {
  return equals(v, need(arg, line));
}
bool t_ne(const value& v, const value* arg, int line) {
  return !equals(v, need(arg, line));
}
bool t_lt(const value& v, const value* arg, int line) {
  return unwrap(less(v, need(arg, line)), line);
}
bool t_gt(const value& v, const value* arg, int line) {
  return unwrap(less(need(arg, line), v), line);
}
bool t_le(const value& v, const value* arg, int line) {
  return !unwrap(less(need(arg, line), v), line);
}
bool t_ge(const value& v, const value* arg, int line) {
  return !unwrap(less(v, need(arg, line)), line);
}
bool t_in(const value& v, const value* arg, int line) {
  const value& seq = need(arg, line);
  if (seq.type == kind::string)
    return v.type == kind::string && seq.text.find(v.text) != std::string::npos;
  if (seq.type == kind::dict) return v.type == kind::string && seq.find(v.text);
  for (const auto& item : unwrap(iterate(seq), line))
    if (equals(item, v)) return true;
  return false;
}
int64_t integer_of(const value& v, int line) {
  if (v.type != kind::integer) fail(line, fmt::format("{} is not an integer", to_repr(v)));
  return v.integer;
}
bool t_odd(const value& v, const value*, int line) {
  return integer_of(v, line) % 2 != 0;
}
bool t_even(const value& v, const value*, int line) {
  return integer_of(v, line) % 2 == 0;
}
bool t_divisibleby(const value& v, const value* arg, int line) {
  int64_t d = integer_of(need(arg, line), line);
  if (d == 0) fail(line, "integer division or modulo by zero");
  return integer_of(v, line) % d == 0;
}
bool t_sequence(const value& v, const value*, int) {
  return v.type == kind::string || v.type == kind::list || v.type == kind::dict || v.is_undefined();
}

struct named_test {
  const char* name;
  test fn;
};

constexpr named_test tests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"number", t_number},
    {"integer", t_integer},
    {"float", t_float},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"callable", t_callable},
    {"equalto", t_equalto},
    {"eq", t_equalto},
    {"==", t_equalto},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"<", t_lt},
    {"lessthan", t_lt},
    {"gt", t_gt},
    {">", t_gt},
    {"greaterthan", t_gt},
    {"le", t_le},
    {"<=", t_le},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
};

test find_test(std::string_view name) {
  for (const auto& t : tests)
    if (name == t.name) return t.fn;
  return nullptr;
}

} // namespace

bool has_test(std::string_view name) {
  return find_test(name) != nullptr;
}

bool apply_test(const std::string& name, const value& subject, call_args& args, int line) {
  return find_test(name)(subject, find_arg(args, 0, "value"), line);
}

} // namespace kvactor::jinja
