// Methods of str and dict that chat templates call. Lists are immutable in transformers' sandbox,
// so list methods that mutate (append, pop, ...) fail as Jinja2's ImmutableSandboxedEnvironment.
#include "model/jinja/renderer.hpp"
#include "model/jinja/text.hpp"

#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

using method = expected<value> (*)(const value& self, call_args& args);

expected<value> need_string(const value* v, const char* what) {
  if (!v || v->type != kind::string)
    return make_error(errc::invalid_argument, fmt::format("{} must be a str", what));
  return *v;
}

const std::string* optional_chars(call_args& args) {
  const value* chars = find_arg(args, 0, "chars");
  return chars && chars->type == kind::string ? &chars->text : nullptr;
}

expected<value> str_strip(const value& s, call_args& a) {
  return value::from(strip(s.text, optional_chars(a), true, true));
}
expected<value> str_lstrip(const value& s, call_args& a) {
  return value::from(strip(s.text, optional_chars(a), true, false));
}
expected<value> str_rstrip(const value& s, call_args& a) {
  return value::from(strip(s.text, optional_chars(a), false, true));
}
expected<value> str_split(const value& s, call_args& a) {
  const value* sep = find_arg(a, 0, "sep");
  const value* max = find_arg(a, 1, "maxsplit");
  const std::string* sep_text = sep && sep->type == kind::string ? &sep->text : nullptr;
  if (sep_text && sep_text->empty()) return make_error(errc::invalid_argument, "empty separator");
  value_list out;
  for (auto& part : split(s.text, sep_text, max && max->type == kind::integer ? max->integer : -1))
    out.push_back(value::from(std::move(part)));
  return value::list(std::move(out));
}

// startswith/endswith take a str or a tuple (list) of them.
expected<value> affix_test(const value& s, call_args& a, bool prefix) {
  const value* arg = find_arg(a, 0, "prefix");
  if (!arg) return make_error(errc::invalid_argument, "startswith/endswith takes an argument");
  value_list options = arg->type == kind::list ? *arg->items : value_list{*arg};
  for (const auto& option : options) {
    auto text = need_string(&option, "the affix");
    if (!text) return text;
    const std::string& t = text->text;
    bool hit = t.size() <= s.text.size()
               && (prefix ? s.text.compare(0, t.size(), t) == 0
                          : s.text.compare(s.text.size() - t.size(), t.size(), t) == 0);
    if (hit) return value::from(true);
  }
  return value::from(false);
}
expected<value> str_startswith(const value& s, call_args& a) {
  return affix_test(s, a, true);
}
expected<value> str_endswith(const value& s, call_args& a) {
  return affix_test(s, a, false);
}
expected<value> str_upper(const value& s, call_args&) {
  return value::from(to_upper(s.text));
}
expected<value> str_lower(const value& s, call_args&) {
  return value::from(to_lower(s.text));
}
expected<value> str_title(const value& s, call_args&) {
  return value::from(python_title(s.text));
}
expected<value> str_capitalize(const value& s, call_args&) {
  return value::from(capitalize(s.text));
}
expected<value> str_replace(const value& s, call_args& a) {
  auto from = need_string(find_arg(a, 0, "old"), "replace's old");
  auto to = need_string(find_arg(a, 1, "new"), "replace's new");
  if (!from) return from;
  if (!to) return to;
  const value* count = find_arg(a, 2, "count");
  return value::from(replace_all(s.text, from->text, to->text,
                                 count && count->type == kind::integer ? count->integer : -1));
}
expected<value> str_join(const value& s, call_args& a) {
  const value* items = find_arg(a, 0, "iterable");
  if (!items) return make_error(errc::invalid_argument, "join takes an iterable");
  auto list = iterate(*items);
  if (!list) return list.err();
  std::string out;
  for (size_t i = 0; i < list->size(); ++i) {
    if ((*list)[i].type != kind::string)
      return make_error(errc::invalid_argument, "sequence item: expected str instance");
    out += (i ? s.text : "") + (*list)[i].text;
  }
  return value::from(std::move(out));
}
expected<value> str_find(const value& s, call_args& a) {
  auto needle = need_string(find_arg(a, 0, "sub"), "find's argument");
  if (!needle) return needle;
  size_t at = s.text.find(needle->text);
  if (at == std::string::npos) return value::from(int64_t{-1});
  return value::from(static_cast<int64_t>(code_points(s.text.substr(0, at)).size()));
}

expected<value> dict_get(const value& d, call_args& a) {
  const value* key = find_arg(a, 0, "key");
  const value* fallback = find_arg(a, 1, "default");
  if (key && key->type == kind::string)
    if (const value* v = d.find(key->text)) return *v;
  return fallback ? *fallback : value::none();
}
expected<value> dict_items(const value& d, call_args&) {
  value_list out;
  for (const auto& [k, v] : *d.entries)
    out.push_back(value::list({value::from(k), v}));
  return value::list(std::move(out));
}
expected<value> dict_keys(const value& d, call_args&) {
  value_list out;
  for (const auto& [k, v] : *d.entries)
    out.push_back(value::from(k));
  return value::list(std::move(out));
}
expected<value> dict_values(const value& d, call_args&) {
  value_list out;
  for (const auto& [k, v] : *d.entries)
    out.push_back(v);
  return value::list(std::move(out));
}

expected<value> list_mutation(const value&, call_args&) {
  return make_error(errc::invalid_argument, "access to a mutating list method is unsafe "
                                            "(lists are immutable in the sandbox)");
}

method lookup(kind type, const std::string& name) {
  struct entry {
    kind type;
    const char* name;
    method fn;
  };
  static const entry table[] = {
      {kind::string, "strip", str_strip},
      {kind::string, "lstrip", str_lstrip},
      {kind::string, "rstrip", str_rstrip},
      {kind::string, "split", str_split},
      {kind::string, "startswith", str_startswith},
      {kind::string, "endswith", str_endswith},
      {kind::string, "upper", str_upper},
      {kind::string, "lower", str_lower},
      {kind::string, "title", str_title},
      {kind::string, "capitalize", str_capitalize},
      {kind::string, "replace", str_replace},
      {kind::string, "join", str_join},
      {kind::string, "find", str_find},
      {kind::dict, "get", dict_get},
      {kind::dict, "items", dict_items},
      {kind::dict, "keys", dict_keys},
      {kind::dict, "values", dict_values},
      {kind::list, "append", list_mutation},
      {kind::list, "extend", list_mutation},
      {kind::list, "pop", list_mutation},
      {kind::list, "insert", list_mutation},
      {kind::list, "remove", list_mutation},
      {kind::list, "clear", list_mutation},
      {kind::list, "sort", list_mutation},
      {kind::list, "reverse", list_mutation},
  };
  for (const auto& e : table)
    if (e.type == type && name == e.name) return e.fn;
  return nullptr;
}

} // namespace

const value* find_arg(const call_args& args, size_t index, std::string_view name) {
  for (const auto& [k, v] : args.keyword)
    if (k == name) return &v;
  return index < args.positional.size() ? &args.positional[index] : nullptr;
}

value find_method(const value& obj, const std::string& name) {
  method fn = lookup(obj.type, name);
  if (!fn) return value::undefined();
  return value::function([obj, fn](call_args& args) { return fn(obj, args); });
}

} // namespace kvactor::jinja
