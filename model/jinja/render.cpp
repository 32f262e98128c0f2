// Statements: output, if, for (with loop.*), set, namespaces, break/continue and macros.
#include "model/jinja/renderer.hpp"

#include <fmt/format.h>

namespace kvactor::jinja {

renderer::renderer(value_dict globals, render_limits limits) : limits_(limits) {
  scopes_.emplace_back();
  for (auto& [name, v] : globals)
    scopes_.back()[name] = std::move(v);
  scopes_.emplace_back(); // the template's own top-level assignments
}

std::string renderer::run(const node_list& body) {
  std::string out;
  exec(body, out);
  return out;
}

void renderer::step(int line) {
  if (++steps_ > limits_.max_steps)
    fail(line, fmt::format("the template ran more than {} steps", limits_.max_steps));
}

void renderer::emit(std::string& out, std::string_view text, int line) {
  if (out.size() + text.size() > limits_.max_output_bytes)
    fail(line, fmt::format("the output exceeds {} bytes", limits_.max_output_bytes));
  out += text;
}

renderer::flow renderer::exec(const node_list& body, std::string& out) {
  for (const auto& n : body) {
    step(n->line);
    flow f = exec_node(*n, out);
    if (f != flow::normal) return f;
  }
  return flow::normal;
}

renderer::flow renderer::exec_node(const node& n, std::string& out) {
  switch (n.kind) {
  case node_kind::text: emit(out, n.name, n.line); return flow::normal;
  case node_kind::output: emit(out, to_str(eval(*n.exprs[0])), n.line); return flow::normal;
  case node_kind::if_chain: return exec_if(n, out);
  case node_kind::for_loop: return exec_for(n, out);
  case node_kind::set: scopes_.back()[n.targets[0]] = eval(*n.exprs[0]); return flow::normal;
  case node_kind::set_attr: exec_set_attr(n); return flow::normal;
  case node_kind::set_block: {
    std::string captured;
    exec(n.bodies[0], captured);
    scopes_.back()[n.targets[0]] = value::from(std::move(captured));
    return flow::normal;
  }
  case node_kind::loop_break: return flow::broke;
  case node_kind::loop_continue: return flow::continued;
  case node_kind::macro: define_macro(n); return flow::normal;
  }
  return flow::normal;
}

renderer::flow renderer::exec_if(const node& n, std::string& out) {
  for (size_t i = 0; i < n.exprs.size(); ++i)
    if (truthy(eval(*n.exprs[i]))) return exec(n.bodies[i], out);
  if (n.bodies.size() > n.exprs.size()) return exec(n.bodies.back(), out);
  return flow::normal;
}

namespace {

// Binds the loop targets: one name, or several unpacked from a list item.
void bind_targets(std::unordered_map<std::string, value>& scope,
                  const std::vector<std::string>& targets, const value& item, int line) {
  if (targets.size() == 1) {
    scope[targets[0]] = item;
    return;
  }
  value_list parts = unwrap(iterate(item), line);
  if (parts.size() != targets.size())
    fail(line, fmt::format("cannot unpack {} values into {} loop variables", parts.size(),
                           targets.size()));
  for (size_t i = 0; i < targets.size(); ++i)
    scope[targets[i]] = parts[i];
}

value loop_object(const value_list& items, size_t i) {
  auto n = static_cast<int64_t>(items.size());
  auto index = static_cast<int64_t>(i);
  value_dict d = {{"index", value::from(index + 1)},    {"index0", value::from(index)},
                  {"revindex", value::from(n - index)}, {"revindex0", value::from(n - index - 1)},
                  {"first", value::from(i == 0)},       {"last", value::from(index == n - 1)},
                  {"length", value::from(n)},           {"depth", value::from(int64_t{1})},
                  {"depth0", value::from(int64_t{0})}};
  if (i > 0) d.emplace_back("previtem", items[i - 1]);
  if (index + 1 < n) d.emplace_back("nextitem", items[i + 1]);
  d.emplace_back("cycle", value::function([i](call_args& args) -> expected<value> {
                   if (args.positional.empty())
                     return make_error(errc::invalid_argument, "no items for cycling given");
                   return args.positional[i % args.positional.size()];
                 }));
  return value::dict(std::move(d));
}

} // namespace

renderer::flow renderer::exec_for(const node& n, std::string& out) {
  value_list all = unwrap(iterate(eval(*n.exprs[0])), n.line);
  value_list items;
  for (auto& item : all) {
    step(n.line);
    if (n.exprs.size() > 1) {
      scopes_.emplace_back();
      bind_targets(scopes_.back(), n.targets, item, n.line);
      bool keep = truthy(eval(*n.exprs[1]));
      scopes_.pop_back();
      if (!keep) continue;
    }
    items.push_back(std::move(item));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    step(n.line);
    scopes_.emplace_back();
    bind_targets(scopes_.back(), n.targets, items[i], n.line);
    scopes_.back()["loop"] = loop_object(items, i);
    flow f = exec(n.bodies[0], out);
    scopes_.pop_back();
    if (f == flow::broke) break;
  }
  if (items.empty() && n.bodies.size() > 1) return exec(n.bodies[1], out);
  return flow::normal;
}

void renderer::exec_set_attr(const node& n) {
  expr target;
  target.kind = expr_kind::name;
  target.name = n.targets[0];
  target.line = n.line;
  value ns = lookup(target);
  if (ns.type != kind::ns)
    fail(n.line, fmt::format("cannot assign attribute on non-namespace object '{}'", n.targets[0]));
  value v = eval(*n.exprs[0]);
  if (value* slot = ns.find(n.name))
    *slot = std::move(v);
  else
    ns.entries->emplace_back(n.name, std::move(v));
}

void renderer::define_macro(const node& n) {
  const node* definition = &n;
  scopes_.back()[n.name] = value::function([this, definition](call_args& args) -> expected<value> {
    return call_macro(*definition, args);
  });
}

value renderer::call_macro(const node& n, call_args& args) {
  if (++call_depth_ > limits_.max_call_depth)
    fail(n.line, fmt::format("macro calls nested deeper than {}", limits_.max_call_depth));
  if (args.positional.size() > n.targets.size())
    fail(n.line,
         fmt::format("macro '{}' takes not more than {} argument(s)", n.name, n.targets.size()));
  scope frame;
  for (size_t i = 0; i < n.targets.size(); ++i) {
    const value* given = find_arg(args, i, n.targets[i]);
    if (given)
      frame[n.targets[i]] = *given;
    else if (n.exprs[i])
      frame[n.targets[i]] = eval(*n.exprs[i]);
    else
      frame[n.targets[i]] = value::undefined(fmt::format("'{}' is undefined", n.targets[i]));
  }
  scopes_.push_back(std::move(frame));
  std::string out;
  exec(n.bodies[0], out);
  scopes_.pop_back();
  --call_depth_;
  return value::from(std::move(out));
}

} // namespace kvactor::jinja
