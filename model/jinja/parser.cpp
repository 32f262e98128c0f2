// Statements: text, {{ output }}, and the tags if/for/set/break/continue/macro.
#include "model/jinja/parser.hpp"
#include "model/jinja/parse_cursor.hpp"

#include <algorithm>
#include <fmt/ranges.h>

namespace kvactor::jinja {
namespace {

using node_ptr = std::unique_ptr<node>;

// Tags Jinja2 knows that this interpreter refuses (loops and macros are handled; these are not).
constexpr std::string_view refused_tags[] = {"extends", "include", "import", "from", "block",
                                             "filter",  "call",    "with",   "raw",  "autoescape",
                                             "do",      "trans",   "print"};

class statement_parser {
public:
  explicit statement_parser(const std::vector<token>& tokens) : c_{tokens} {}

  node_list run() {
    std::string stopped_at;
    node_list body = parse_body({}, stopped_at);
    return body;
  }

private:
  // Nodes up to one of the `stops` tags (consumed, its name in `stopped_at`) or the end.
  node_list parse_body(std::initializer_list<std::string_view> stops, std::string& stopped_at) {
    node_list body;
    c_.enter();
    while (true) {
      const token& t = c_.peek();
      if (t.kind == token_kind::end) {
        if (stops.size() != 0)
          fail(t.line,
               fmt::format("unexpected end of template, expected '{}'", fmt::join(stops, "' or '")),
               errc::parse_error);
        break;
      }
      if (t.kind == token_kind::text) {
        body.push_back(make(node_kind::text, c_.advance().line));
        body.back()->name = t.text;
      } else if (t.kind == token_kind::output_open) {
        body.push_back(parse_output());
      } else if (is_stop(stops, stopped_at)) {
        break;
      } else {
        body.push_back(parse_tag());
      }
    }
    c_.leave();
    return body;
  }

  // At "{% name": when name is one of `stops`, consumes "{% name" and reports it.
  bool is_stop(std::initializer_list<std::string_view> stops, std::string& stopped_at) {
    const token& name = c_.peek(1);
    if (name.kind != token_kind::name) return false;
    if (std::find(stops.begin(), stops.end(), name.text) == stops.end()) return false;
    stopped_at = name.text;
    c_.advance();
    c_.advance();
    return true;
  }

  static node_ptr make(node_kind kind, int line) {
    auto n = std::make_unique<node>();
    n->kind = kind;
    n->line = line;
    return n;
  }

  node_ptr parse_output() {
    auto n = make(node_kind::output, c_.advance().line);
    n->exprs.push_back(parse_tuple(c_));
    expect_close(token_kind::output_close);
    return n;
  }

  void expect_close(token_kind kind = token_kind::block_close) {
    if (!c_.at(kind))
      fail(c_.line(), fmt::format("expected the end of the tag, got {}", c_.describe()),
           errc::parse_error);
    c_.advance();
  }

  node_ptr parse_tag() {
    c_.advance(); // {%
    int line = c_.line();
    std::string tag = c_.expect_name();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "break" || tag == "continue") return parse_loop_control(tag, line);
    bool refused =
        std::find(std::begin(refused_tags), std::end(refused_tags), tag) != std::end(refused_tags);
    fail(line,
         refused ? fmt::format("unsupported tag '{}'", tag)
                 : fmt::format("unknown tag '{}' (or one outside its block)", tag),
         refused ? errc::unsupported : errc::parse_error);
  }

  node_ptr parse_if(int line) {
    auto n = make(node_kind::if_chain, line);
    std::string stopped_at = "elif";
    while (stopped_at == "elif") {
      n->exprs.push_back(parse_tuple(c_));
      expect_close();
      n->bodies.push_back(parse_body({"elif", "else", "endif"}, stopped_at));
    }
    if (stopped_at == "else") {
      expect_close();
      n->bodies.push_back(parse_body({"endif"}, stopped_at));
    }
    expect_close();
    return n;
  }

  node_ptr parse_for(int line) {
    auto n = make(node_kind::for_loop, line);
    do {
      n->targets.push_back(c_.expect_name());
    } while (c_.accept_op(","));
    if (!c_.accept_name("in")) fail(c_.line(), "expected 'in' in the for tag", errc::parse_error);
    n->exprs.push_back(parse_tuple(c_, false));
    if (c_.accept_name("if")) n->exprs.push_back(parse_expression(c_, false));
    if (c_.at_name("recursive")) fail(c_.line(), "unsupported: recursive loops", errc::unsupported);
    expect_close();
    ++loops_;
    std::string stopped_at;
    n->bodies.push_back(parse_body({"else", "endfor"}, stopped_at));
    --loops_;
    if (stopped_at == "else") {
      expect_close();
      n->bodies.push_back(parse_body({"endfor"}, stopped_at));
    }
    expect_close();
    return n;
  }

  node_ptr parse_set(int line) {
    std::string target = c_.expect_name();
    if (c_.accept_op(".")) {
      auto n = make(node_kind::set_attr, line);
      n->targets.push_back(target);
      n->name = c_.expect_name();
      c_.expect_op("=");
      n->exprs.push_back(parse_tuple(c_));
      expect_close();
      return n;
    }
    if (c_.at_op(",")) fail(line, "unsupported: unpacking in set", errc::unsupported);
    if (c_.accept_op("=")) {
      auto n = make(node_kind::set, line);
      n->targets.push_back(target);
      n->exprs.push_back(parse_tuple(c_));
      expect_close();
      return n;
    }
    if (c_.at_op("|")) fail(line, "unsupported: filtered block set", errc::unsupported);
    expect_close();
    auto n = make(node_kind::set_block, line);
    n->targets.push_back(target);
    std::string stopped_at;
    n->bodies.push_back(parse_body({"endset"}, stopped_at));
    expect_close();
    return n;
  }

  node_ptr parse_macro(int line) {
    auto n = make(node_kind::macro, line);
    n->name = c_.expect_name();
    c_.expect_op("(");
    while (!c_.accept_op(")")) {
      if (!n->targets.empty()) c_.expect_op(",");
      n->targets.push_back(c_.expect_name());
      n->exprs.push_back(c_.accept_op("=") ? parse_expression(c_) : nullptr);
    }
    expect_close();
    std::string stopped_at;
    int loops = std::exchange(loops_, 0);
    n->bodies.push_back(parse_body({"endmacro"}, stopped_at));
    loops_ = loops;
    if (c_.at(token_kind::name)) c_.advance(); // {% endmacro name %}
    expect_close();
    return n;
  }

  node_ptr parse_loop_control(const std::string& tag, int line) {
    if (loops_ == 0) fail(line, fmt::format("'{}' outside a loop", tag), errc::parse_error);
    expect_close();
    return make(tag == "break" ? node_kind::loop_break : node_kind::loop_continue, line);
  }

  parse_cursor c_;
  int loops_ = 0;
};

} // namespace

expected<node_list> parse_tokens(const std::vector<token>& tokens) {
  try {
    return statement_parser(tokens).run();
  } catch (const failure& f) {
    return make_error(f.code, fmt::format("line {}: {}", f.line, f.message));
  }
}

} // namespace kvactor::jinja
