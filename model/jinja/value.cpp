#include "model/jinja/value.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace kvactor::jinja {

value value::undefined(std::string why) {
  value v;
  v.text = std::move(why);
  return v;
}
value value::none() {
  value v;
  v.type = kind::none;
  return v;
}
value value::from(bool b) {
  value v;
  v.type = kind::boolean;
  v.boolean = b;
  return v;
}
value value::from(int64_t i) {
  value v;
  v.type = kind::integer;
  v.integer = i;
  return v;
}
value value::from(double f) {
  value v;
  v.type = kind::floating;
  v.floating = f;
  return v;
}
value value::from(std::string s) {
  value v;
  v.type = kind::string;
  v.text = std::move(s);
  return v;
}
value value::list(value_list items) {
  value v;
  v.type = kind::list;
  v.items = std::make_shared<value_list>(std::move(items));
  return v;
}
value value::dict(value_dict entries) {
  value v;
  v.type = kind::dict;
  v.entries = std::make_shared<value_dict>(std::move(entries));
  return v;
}
value value::ns(value_dict entries) {
  value v = dict(std::move(entries));
  v.type = kind::ns;
  return v;
}
value value::function(native_function fn) {
  value v;
  v.type = kind::function;
  v.call = std::make_shared<native_function>(std::move(fn));
  return v;
}

const value* value::find(std::string_view key) const {
  if (!entries) return nullptr;
  for (const auto& [k, v] : *entries)
    if (k == key) return &v;
  return nullptr;
}
value* value::find(std::string_view key) {
  return const_cast<value*>(std::as_const(*this).find(key));
}

bool truthy(const value& v) {
  switch (v.type) {
  case kind::undefined:
  case kind::none: return false;
  case kind::boolean: return v.boolean;
  case kind::integer: return v.integer != 0;
  case kind::floating: return v.floating != 0.0;
  case kind::string: return !v.text.empty();
  case kind::list: return !v.items->empty();
  case kind::dict: return !v.entries->empty();
  case kind::ns:
  case kind::function: return true;
  }
  return false;
}

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits in scientific form, then laid out as Python's repr does.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, end);
  auto e_pos = sci.find('e');
  int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string mantissa = sci.substr(0, e_pos);
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out = "0." + std::string(-exponent - 1, '0') + digits;
  } else {
    auto int_len = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return negative ? "-" + out : out;
}

std::string to_str(const value& v) {
  switch (v.type) {
  case kind::undefined: return "";
  case kind::none: return "None";
  case kind::boolean: return v.boolean ? "True" : "False";
  case kind::integer: return std::to_string(v.integer);
  case kind::floating: return format_double(v.floating);
  case kind::string: return v.text;
  case kind::ns: return "<Namespace>";
  case kind::function: return "<function>";
  default: return to_repr(v);
  }
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  char quote = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c == quote)
      out += std::string("\\") + quote;
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + quote;
}

std::string to_repr(const value& v) {
  if (v.type == kind::string) return repr_string(v.text);
  if (v.type == kind::undefined) return "Undefined";
  if (v.type == kind::list) {
    std::string out = "[";
    for (size_t i = 0; i < v.items->size(); ++i)
      out += (i ? ", " : "") + to_repr((*v.items)[i]);
    return out + "]";
  }
  if (v.type == kind::dict) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : *v.entries) {
      out += (first ? "" : ", ") + repr_string(k) + ": " + to_repr(item);
      first = false;
    }
    return out + "}";
  }
  return to_str(v);
}

double as_double(const value& v) {
  if (v.type == kind::boolean) return v.boolean ? 1.0 : 0.0;
  if (v.type == kind::integer) return static_cast<double>(v.integer);
  return v.floating;
}

static bool list_equals(const value_list& a, const value_list& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!equals(a[i], b[i])) return false;
  return true;
}

static bool dict_equals(const value& a, const value& b) {
  if (a.entries->size() != b.entries->size()) return false;
  for (const auto& [k, item] : *a.entries) {
    const value* other = b.find(k);
    if (!other || !equals(item, *other)) return false;
  }
  return true;
}

bool equals(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.type != kind::floating && b.type != kind::floating)
      return (a.type == kind::boolean ? a.boolean : a.integer)
             == (b.type == kind::boolean ? b.boolean : b.integer);
    return as_double(a) == as_double(b);
  }
  if (a.type != b.type) return false;
  switch (a.type) {
  case kind::undefined:
  case kind::none: return true;
  case kind::string: return a.text == b.text;
  case kind::list: return list_equals(*a.items, *b.items);
  case kind::dict: return dict_equals(a, b);
  default: return a.entries == b.entries && a.call == b.call;
  }
}

expected<bool> less(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) return as_double(a) < as_double(b);
  if (a.type == kind::string && b.type == kind::string) return a.text < b.text;
  if (a.type == kind::list && b.type == kind::list) {
    const auto& x = *a.items;
    const auto& y = *b.items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return make_error(errc::invalid_argument,
                    fmt::format("'<' not supported between {} and {}", type_name(a), type_name(b)));
}

std::string type_name(const value& v) {
  switch (v.type) {
  case kind::undefined: return "Undefined";
  case kind::none: return "NoneType object";
  case kind::boolean: return "bool object";
  case kind::integer: return "int object";
  case kind::floating: return "float object";
  case kind::string: return "str object";
  case kind::list: return "list object";
  case kind::dict: return "dict object";
  case kind::ns: return "Namespace object";
  case kind::function: return "function object";
  }
  return "object";
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    auto lead = static_cast<unsigned char>(s[i]);
    size_t n = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

expected<int64_t> length(const value& v) {
  switch (v.type) {
  case kind::undefined: return int64_t{0};
  case kind::string: return static_cast<int64_t>(code_points(v.text).size());
  case kind::list: return static_cast<int64_t>(v.items->size());
  case kind::dict: return static_cast<int64_t>(v.entries->size());
  default:
    return make_error(errc::invalid_argument,
                      fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

expected<value_list> iterate(const value& v) {
  value_list out;
  switch (v.type) {
  case kind::undefined: return out;
  case kind::list: return *v.items;
  case kind::dict:
    for (const auto& [k, item] : *v.entries)
      out.push_back(value::from(k));
    return out;
  case kind::string:
    for (auto cp : code_points(v.text))
      out.push_back(value::from(std::string(cp)));
    return out;
  default:
    return make_error(errc::invalid_argument, fmt::format("'{}' is not iterable", type_name(v)));
  }
}

} // namespace kvactor::jinja
