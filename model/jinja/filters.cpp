// Jinja2's built-in filters that chat templates use, plus transformers' tojson.
#include "model/jinja/parser.hpp"
#include "model/jinja/renderer.hpp"
#include "model/jinja/text.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

using filter = value (*)(const value& v, call_args& a, int line);

const std::string* string_arg(const call_args& a, size_t i, std::string_view name) {
  const value* v = find_arg(a, i, name);
  return v && v->type == kind::string ? &v->text : nullptr;
}

value f_trim(const value& v, call_args& a, int) {
  return value::from(strip(to_str(v), string_arg(a, 0, "chars"), true, true));
}
value f_length(const value& v, call_args&, int line) {
  return value::from(unwrap(length(v), line));
}
value f_upper(const value& v, call_args&, int) {
  return value::from(to_upper(to_str(v)));
}
value f_lower(const value& v, call_args&, int) {
  return value::from(to_lower(to_str(v)));
}
value f_capitalize(const value& v, call_args&, int) {
  return value::from(capitalize(to_str(v)));
}
value f_title(const value& v, call_args&, int) {
  return value::from(jinja_title(to_str(v)));
}
value f_string(const value& v, call_args&, int) {
  return value::from(to_str(v));
}
value f_safe(const value& v, call_args&, int) {
  return v;
}

value f_replace(const value& v, call_args& a, int line) {
  const value* from = find_arg(a, 0, "old");
  const value* to = find_arg(a, 1, "new");
  const value* count = find_arg(a, 2, "count");
  if (!from || !to) fail(line, "replace needs the old and new strings");
  return value::from(replace_all(to_str(v), to_str(*from), to_str(*to),
                                 count && count->type == kind::integer ? count->integer : -1));
}

value f_escape(const value& v, call_args&, int) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&#34;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  }
  return value::from(std::move(out));
}

value f_join(const value& v, call_args& a, int line) {
  const std::string* sep = string_arg(a, 0, "d");
  const value* attribute = find_arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const auto& item : unwrap(iterate(v), line)) {
    out += first ? "" : (sep ? *sep : "");
    out += to_str(attribute ? get_item(item, *attribute, line) : item);
    first = false;
  }
  return value::from(std::move(out));
}

value f_first(const value& v, call_args&, int line) {
  auto items = unwrap(iterate(v), line);
  return items.empty() ? value::undefined("no first item, sequence was empty") : items.front();
}
value f_last(const value& v, call_args&, int line) {
  auto items = unwrap(iterate(v), line);
  return items.empty() ? value::undefined("no last item, sequence was empty") : items.back();
}

value f_default(const value& v, call_args& a, int) {
  const value* fallback = find_arg(a, 0, "default_value");
  const value* boolean = find_arg(a, 1, "boolean");
  bool use_default = v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v));
  if (!use_default) return v;
  return fallback ? *fallback : value::from(std::string());
}

value f_int(const value& v, call_args& a, int) {
  const value* fallback = find_arg(a, 0, "default");
  value otherwise = fallback ? *fallback : value::from(int64_t{0});
  if (v.type == kind::integer) return v;
  if (v.type == kind::boolean) return value::from(int64_t{v.boolean});
  if (v.type == kind::floating)
    return std::isfinite(v.floating) ? value::from(static_cast<int64_t>(v.floating)) : otherwise;
  if (v.type != kind::string) return otherwise;
  std::string s = strip(v.text, nullptr, true, true);
  int64_t parsed = 0;
  auto [ptr, ec] =
      std::from_chars(s.data() + (s.size() && s[0] == '+'), s.data() + s.size(), parsed);
  if (ec == std::errc() && ptr == s.data() + s.size() && !s.empty()) return value::from(parsed);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d))
    return value::from(static_cast<int64_t>(d));
  return otherwise;
}

value f_float(const value& v, call_args& a, int) {
  const value* fallback = find_arg(a, 0, "default");
  if (v.is_number()) return value::from(as_double(v));
  if (v.type == kind::string) {
    std::string s = strip(v.text, nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return value::from(d);
  }
  return fallback ? *fallback : value::from(0.0);
}

value f_list(const value& v, call_args&, int line) {
  return value::list(unwrap(iterate(v), line));
}

value f_items(const value& v, call_args&, int line) {
  if (v.is_undefined()) return value::list({});
  if (v.type != kind::dict) fail(line, "can only get item pairs from a mapping");
  value_list out;
  for (const auto& [k, item] : *v.entries)
    out.push_back(value::list({value::from(k), item}));
  return value::list(std::move(out));
}

value f_reverse(const value& v, call_args&, int line) {
  if (v.type == kind::string) {
    auto cps = code_points(v.text);
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it)
      out += *it;
    return value::from(std::move(out));
  }
  auto items = unwrap(iterate(v), line);
  return value::list(value_list(items.rbegin(), items.rend()));
}

value f_abs(const value& v, call_args&, int line) {
  if (v.type == kind::integer) return value::from(v.integer < 0 ? -v.integer : v.integer);
  if (v.type == kind::floating) return value::from(std::fabs(v.floating));
  fail(line, fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

// select/reject (test on the item) and selectattr/rejectattr (test on item.attr); no test name
// means truthiness.
value select_items(const value& v, call_args& a, int line, bool by_attribute, bool keep) {
  size_t next = 0;
  const value* attribute = by_attribute ? find_arg(a, next++, "attr") : nullptr;
  if (by_attribute && !attribute) fail(line, "selectattr/rejectattr need an attribute name");
  const value* test = next < a.positional.size() ? &a.positional[next++] : nullptr;
  call_args test_args;
  for (size_t i = next; i < a.positional.size(); ++i)
    test_args.positional.push_back(a.positional[i]);
  if (test && (test->type != kind::string || !has_test(test->text)))
    fail(line, fmt::format("no test named {}", to_repr(*test)));
  value_list out;
  for (const auto& item : unwrap(iterate(v), line)) {
    value subject = attribute ? get_attribute(item, to_str(*attribute), line) : item;
    bool passed = test ? apply_test(test->text, subject, test_args, line) : truthy(subject);
    if (passed == keep) out.push_back(item);
  }
  return value::list(std::move(out));
}
value f_select(const value& v, call_args& a, int line) {
  return select_items(v, a, line, false, true);
}
value f_reject(const value& v, call_args& a, int line) {
  return select_items(v, a, line, false, false);
}
value f_selectattr(const value& v, call_args& a, int line) {
  return select_items(v, a, line, true, true);
}
value f_rejectattr(const value& v, call_args& a, int line) {
  return select_items(v, a, line, true, false);
}

// map(attribute='x', default=...) or map('filter', args...).
value f_map(const value& v, call_args& a, int line) {
  const value* attribute = find_arg(a, 99, "attribute");
  const value* fallback = find_arg(a, 99, "default");
  value_list out;
  if (attribute) {
    for (const auto& item : unwrap(iterate(v), line)) {
      value x = get_item(item, *attribute, line);
      out.push_back(x.is_undefined() && fallback ? *fallback : x);
    }
    return value::list(std::move(out));
  }
  if (a.positional.empty() || a.positional[0].type != kind::string
      || !has_filter(a.positional[0].text))
    fail(line, "map needs attribute= or the name of a filter");
  call_args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const auto& item : unwrap(iterate(v), line))
    out.push_back(apply_filter(a.positional[0].text, item, rest, line));
  return value::list(std::move(out));
}

// transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
value f_tojson(const value& v, call_args& a, int line) {
  const value* ascii = find_arg(a, 0, "ensure_ascii");
  const value* indent = find_arg(a, 1, "indent");
  const value* separators = find_arg(a, 2, "separators");
  const value* sort_keys = find_arg(a, 3, "sort_keys");
  if (ascii && truthy(*ascii)) fail(line, "unsupported: tojson with ensure_ascii=True");
  int width = indent && indent->type == kind::integer
                  ? static_cast<int>(std::clamp<int64_t>(indent->integer, 0, 64))
                  : -1;
  std::string item_sep = width >= 0 ? "," : ", ";
  std::string key_sep = ": ";
  if (separators && separators->type == kind::list && separators->items->size() == 2) {
    item_sep = to_str((*separators->items)[0]);
    key_sep = to_str((*separators->items)[1]);
  }
  return value::from(dump_json(v, width, item_sep, key_sep, sort_keys && truthy(*sort_keys), line));
}

struct named_filter {
  const char* name;
  filter fn;
};

constexpr named_filter filters[] = {
    {"trim", f_trim},
    {"tojson", f_tojson},
    {"length", f_length},
    {"count", f_length},
    {"upper", f_upper},
    {"lower", f_lower},
    {"capitalize", f_capitalize},
    {"title", f_title},
    {"replace", f_replace},
    {"join", f_join},
    {"first", f_first},
    {"last", f_last},
    {"default", f_default},
    {"d", f_default},
    {"string", f_string},
    {"int", f_int},
    {"float", f_float},
    {"list", f_list},
    {"items", f_items},
    {"select", f_select},
    {"reject", f_reject},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"map", f_map},
    {"reverse", f_reverse},
    {"safe", f_safe},
    {"e", f_escape},
    {"escape", f_escape},
    {"abs", f_abs},
};

filter find_filter(std::string_view name) {
  for (const auto& f : filters)
    if (name == f.name) return f.fn;
  return nullptr;
}

} // namespace

bool has_filter(std::string_view name) {
  return find_filter(name) != nullptr;
}

value apply_filter(const std::string& name, const value& subject, call_args& args, int line) {
  return find_filter(name)(subject, args, line);
}

} // namespace kvactor::jinja
