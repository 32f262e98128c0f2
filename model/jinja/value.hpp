// The values a template computes with: Python's types as Jinja2 sees them (None, bool, int, float,
// str, list, dict), Jinja2's lenient Undefined, namespace() objects and callables.
#pragma once

#include "messages/errc.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvactor::jinja {

struct value;
using value_list = std::vector<value>;
// Insertion-ordered like a Python dict; templates hold small dicts, so lookups are linear.
using value_dict = std::vector<std::pair<std::string, value>>;

// Positional and keyword arguments of a call.
struct call_args {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> keyword;
};
// A callable returns its value or an error message (the caller adds the line).
using native_function = std::function<expected<value>(call_args&)>;

enum class kind : uint8_t {
  undefined,
  none,
  boolean,
  integer,
  floating,
  string,
  list,
  dict,
  ns,
  function
};

struct value {
  kind type = kind::undefined;
  bool boolean = false;
  int64_t integer = 0;
  double floating = 0.0;
  std::string text; // the string, or for an undefined value the reason it is undefined
  std::shared_ptr<value_list> items;
  std::shared_ptr<value_dict> entries; // dict entries, or a namespace's attributes
  std::shared_ptr<native_function> call;

  static value undefined(std::string why = {});
  static value none();
  static value from(bool b);
  static value from(int64_t i);
  static value from(double f);
  static value from(std::string s);
  static value list(value_list items);
  static value dict(value_dict entries);
  static value ns(value_dict entries);
  static value function(native_function fn);

  bool is_undefined() const { return type == kind::undefined; }
  bool is_number() const {
    return type == kind::integer || type == kind::floating || type == kind::boolean;
  }
  // Dict entry or namespace attribute by key; null when absent.
  const value* find(std::string_view key) const;
  value* find(std::string_view key);
};

// Python's bool(x) (undefined is false).
bool truthy(const value& v);
// Python's str(x) as Jinja2 prints it (undefined prints as nothing).
std::string to_str(const value& v);
// Python's repr(x), used inside printed lists and dicts.
std::string to_repr(const value& v);
// Python's ==.
bool equals(const value& a, const value& b);
// Python's < for numbers, strings and lists; an error for other pairs.
expected<bool> less(const value& a, const value& b);
// The numeric value of a bool, int or float.
double as_double(const value& v);
// Python's type name, for error messages ("dict object", "str object").
std::string type_name(const value& v);
// Python's len(x); an error for numbers.
expected<int64_t> length(const value& v);
// The items a for loop or list() sees: list items, dict keys, string characters.
expected<value_list> iterate(const value& v);
// Python's float repr: 1.0, 0.1, 1e+16.
std::string format_double(double d);

// UTF-8 code points of a string, as Python's str indexing and len() count them.
std::vector<std::string_view> code_points(std::string_view s);

} // namespace kvactor::jinja
