// Binary operators with Python's semantics: int stays int (overflow is an error, Python would
// grow), / is true division, // and % floor, ~ concatenates str() of both sides.
#include "model/jinja/renderer.hpp"

#include <cmath>
#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

// Longer results (from "ab" * n or [x] * n) are refused: the sandbox's guard against huge strings.
constexpr size_t max_repeat_size = 1u << 24;

bool is_int(const value& v) {
  return v.type == kind::integer || v.type == kind::boolean;
}
int64_t int_of(const value& v) {
  return v.type == kind::boolean ? int64_t{v.boolean} : v.integer;
}

[[noreturn]] void unsupported_operands(const std::string& op, const value& a, const value& b,
                                       int line) {
  fail(line, fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a),
                         type_name(b)));
}

template <class Op>
value checked(Op op, int64_t a, int64_t b, int line) {
  int64_t result = 0;
  if (op(a, b, &result)) fail(line, "integer overflow");
  return value::from(result);
}

double floor_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

value integer_op(const std::string& op, int64_t a, int64_t b, int line) {
  auto add = [](int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); };
  auto sub = [](int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); };
  auto mul = [](int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); };
  if (op == "+") return checked(add, a, b, line);
  if (op == "-") return checked(sub, a, b, line);
  if (op == "*") return checked(mul, a, b, line);
  if (op == "/") {
    if (b == 0) fail(line, "division by zero");
    return value::from(static_cast<double>(a) / static_cast<double>(b));
  }
  if (b == 0 && (op == "//" || op == "%")) fail(line, "integer division or modulo by zero");
  if (op == "//") {
    if (a == INT64_MIN && b == -1) fail(line, "integer overflow");
    int64_t q = a / b;
    return value::from((a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q);
  }
  if (op == "%") {
    if (b == -1) return value::from(int64_t{0});
    int64_t m = a % b;
    return value::from((m != 0 && ((m < 0) != (b < 0))) ? m + b : m);
  }
  // **: a negative exponent gives a float, as in Python.
  if (b < 0) return value::from(std::pow(static_cast<double>(a), static_cast<double>(b)));
  int64_t result = 1;
  for (int64_t i = 0; i < b; ++i) {
    if (__builtin_mul_overflow(result, a, &result)) fail(line, "integer overflow");
    if (result == 0 || result == 1) break;
  }
  return value::from(result);
}

value float_op(const std::string& op, double a, double b, int line) {
  if (op == "+") return value::from(a + b);
  if (op == "-") return value::from(a - b);
  if (op == "*") return value::from(a * b);
  if (op == "**") return value::from(std::pow(a, b));
  if (b == 0) fail(line, "float division by zero");
  if (op == "/") return value::from(a / b);
  if (op == "//") return value::from(std::floor(a / b));
  return value::from(floor_mod(a, b));
}

value repeat(const value& seq, int64_t times, int line) {
  size_t n = times > 0 ? static_cast<size_t>(times) : 0;
  size_t unit = seq.type == kind::string ? seq.text.size() : seq.items->size();
  if (unit != 0 && n > max_repeat_size / unit)
    fail(line, fmt::format("the repeated value would exceed {} items", max_repeat_size));
  if (seq.type == kind::string) {
    std::string out;
    for (size_t i = 0; i < n; ++i)
      out += seq.text;
    return value::from(std::move(out));
  }
  value_list out;
  for (size_t i = 0; i < n; ++i)
    out.insert(out.end(), seq.items->begin(), seq.items->end());
  return value::list(std::move(out));
}

value sequence_op(const std::string& op, const value& a, const value& b, int line) {
  if (op == "+" && a.type == kind::string && b.type == kind::string)
    return value::from(a.text + b.text);
  if (op == "+" && a.type == kind::list && b.type == kind::list) {
    value_list out = *a.items;
    out.insert(out.end(), b.items->begin(), b.items->end());
    return value::list(std::move(out));
  }
  bool a_seq = a.type == kind::string || a.type == kind::list;
  bool b_seq = b.type == kind::string || b.type == kind::list;
  if (op == "*" && a_seq && is_int(b)) return repeat(a, int_of(b), line);
  if (op == "*" && b_seq && is_int(a)) return repeat(b, int_of(a), line);
  if (op == "+" && a.type == kind::string)
    fail(line, fmt::format("can only concatenate str (not \"{}\") to str",
                           type_name(b).substr(0, type_name(b).find(' '))));
  unsupported_operands(op, a, b, line);
}

} // namespace

value renderer::eval_binary(const expr& e) {
  value a = eval(*e.children[0]);
  value b = eval(*e.children[1]);
  const std::string& op = e.name;
  if (op == "~") return value::from(to_str(a) + to_str(b));
  if (a.is_undefined() || b.is_undefined()) {
    const value& u = a.is_undefined() ? a : b;
    fail(e.line, u.text.empty() ? "undefined value" : u.text);
  }
  if (is_int(a) && is_int(b)) return integer_op(op, int_of(a), int_of(b), e.line);
  if (a.is_number() && b.is_number()) return float_op(op, as_double(a), as_double(b), e.line);
  return sequence_op(op, a, b, e.line);
}

} // namespace kvactor::jinja
