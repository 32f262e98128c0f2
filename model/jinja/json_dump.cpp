// Python's json.dumps(x, ensure_ascii=False, ...): "\uXXXX" only for control characters,
// floats as repr(), insertion order unless sort_keys.
#include "model/jinja/renderer.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

// Deeper structures are refused (json.dumps raises RecursionError around 1000).
constexpr int max_json_depth = 512;

struct json_writer {
  int indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
  int line;
  std::string out;

  void quote(const std::string& s) {
    out += '"';
    for (unsigned char c : s) {
      switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);
      }
    }
    out += '"';
  }

  void newline(int depth) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * depth), ' ');
  }

  void number(double d) {
    if (std::isnan(d))
      out += "NaN";
    else if (std::isinf(d))
      out += d > 0 ? "Infinity" : "-Infinity";
    else
      out += format_double(d);
  }

  void list(const value_list& items, int depth) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep;
      newline(depth + 1);
      write(items[i], depth + 1);
    }
    newline(depth);
    out += ']';
  }

  void dict(const value_dict& entries, int depth) {
    if (entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, value>*> order;
    for (const auto& e : entries)
      order.push_back(&e);
    if (sort_keys)
      std::stable_sort(order.begin(), order.end(),
                       [](auto* a, auto* b) { return a->first < b->first; });
    out += '{';
    for (size_t i = 0; i < order.size(); ++i) {
      if (i) out += item_sep;
      newline(depth + 1);
      quote(order[i]->first);
      out += key_sep;
      write(order[i]->second, depth + 1);
    }
    newline(depth);
    out += '}';
  }

  void write(const value& v, int depth) {
    if (depth > max_json_depth) fail(line, "tojson: nesting too deep");
    switch (v.type) {
    case kind::none: out += "null"; return;
    case kind::boolean: out += v.boolean ? "true" : "false"; return;
    case kind::integer: out += std::to_string(v.integer); return;
    case kind::floating: number(v.floating); return;
    case kind::string: quote(v.text); return;
    case kind::list: list(*v.items, depth); return;
    case kind::dict: dict(*v.entries, depth); return;
    default: fail(line, fmt::format("Object of type {} is not JSON serializable", type_name(v)));
    }
  }
};

} // namespace

std::string dump_json(const value& v, int indent, const std::string& item_separator,
                      const std::string& key_separator, bool sort_keys, int line) {
  json_writer w{indent, item_separator, key_separator, sort_keys, line, {}};
  w.write(v, 0);
  return std::move(w.out);
}

} // namespace kvactor::jinja
