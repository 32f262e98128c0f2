// The globals transformers gives every chat template (raise_exception, strftime_now) and
// Jinja2's own (namespace, range, dict).
#include "model/jinja/renderer.hpp"

#include <ctime>
#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

// Jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t max_range = 100000;

expected<value> raise_exception(call_args& args) {
  std::string message = args.positional.empty() ? "" : to_str(args.positional[0]);
  return make_error(errc::invalid_argument, message);
}

// The local time now, as transformers' datetime.now().strftime(format).
expected<value> strftime_now(call_args& args) {
  if (args.positional.empty() || args.positional[0].type != kind::string)
    return make_error(errc::invalid_argument, "strftime_now needs a format string");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  size_t n = std::strftime(buf, sizeof buf, args.positional[0].text.c_str(), &local);
  return value::from(std::string(buf, n));
}

expected<value> keyword_dict(call_args& args, bool as_namespace) {
  value_dict entries;
  if (!args.positional.empty() && args.positional[0].type == kind::dict)
    entries = *args.positional[0].entries;
  for (auto& [k, v] : args.keyword)
    entries.emplace_back(k, v);
  return as_namespace ? value::ns(std::move(entries)) : value::dict(std::move(entries));
}

expected<value> range(call_args& args) {
  std::vector<int64_t> bounds;
  for (const auto& a : args.positional) {
    if (a.type != kind::integer)
      return make_error(errc::invalid_argument, "range() arguments must be integers");
    bounds.push_back(a.integer);
  }
  if (bounds.empty() || bounds.size() > 3)
    return make_error(errc::invalid_argument, "range() takes 1 to 3 arguments");
  int64_t start = bounds.size() == 1 ? 0 : bounds[0];
  int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
  int64_t step = bounds.size() == 3 ? bounds[2] : 1;
  if (step == 0) return make_error(errc::invalid_argument, "range() arg 3 must not be zero");
  value_list out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= max_range)
      return make_error(errc::invalid_argument,
                        fmt::format("range too big, maximum size for range is {}", max_range));
    out.push_back(value::from(i));
  }
  return value::list(std::move(out));
}

} // namespace

void add_builtins(value_dict& globals) {
  globals.emplace_back("raise_exception", value::function(raise_exception));
  globals.emplace_back("strftime_now", value::function(strftime_now));
  globals.emplace_back("namespace",
                       value::function([](call_args& a) { return keyword_dict(a, true); }));
  globals.emplace_back("dict",
                       value::function([](call_args& a) { return keyword_dict(a, false); }));
  globals.emplace_back("range", value::function(range));
}

} // namespace kvactor::jinja
