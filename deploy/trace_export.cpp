#include "deploy/trace_export.hpp"

#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "deploy/trace_command.hpp"
#include "messages/codec.hpp"
#include "messages/cudagraph.hpp"

namespace kvactor {

namespace {

using trace_json = nlohmann::json;

constexpr int pid = 1;
constexpr int steps_tid = 0;

double micros(int64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

std::string short_type(const std::string& type) {
  return type.substr(type.rfind(':') + 1);
}

// Thread ids by actor, in order of first appearance (the steps track is 0).
class tracks {
public:
  int of(const std::string& actor) {
    auto [it, fresh] = ids_.emplace(actor, static_cast<int>(ids_.size()) + 1);
    if (fresh) order_.push_back(actor);
    return it->second;
  }
  void name_all(trace_json& events) const {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", steps_tid},
                      {"args", {{"name", "steps"}}}});
    for (const auto& actor : order_)
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", pid},
                        {"tid", ids_.at(actor)},
                        {"args", {{"name", actor}}}});
  }

private:
  std::map<std::string, int> ids_;
  std::vector<std::string> order_;
};

// The message's two slices and the flow arrow between them.
void add_message(const trace_record& r, tracks& t, trace_json& events) {
  const double ts = micros(r.timestamp_ns);
  const std::string name = short_type(r.type);
  const trace_json args = {{"index", r.index}, {"summary", describe_record(r)}};
  const int from = t.of(r.sender), to = t.of(r.receiver);
  for (int tid : {from, to})
    events.push_back({{"ph", "X"},
                      {"cat", "message"},
                      {"name", name},
                      {"pid", pid},
                      {"tid", tid},
                      {"ts", ts},
                      {"dur", 1},
                      {"args", args}});
  events.push_back({{"ph", "s"},
                    {"cat", "message"},
                    {"name", name},
                    {"id", r.index},
                    {"pid", pid},
                    {"tid", from},
                    {"ts", ts}});
  events.push_back({{"ph", "f"},
                    {"bp", "e"},
                    {"cat", "message"},
                    {"name", name},
                    {"id", r.index},
                    {"pid", pid},
                    {"tid", to},
                    {"ts", ts}});
}

// A capture the rank reported: a span of its duration, ending at the report.
void add_capture(const trace_record& r, tracks& t, trace_json& events) {
  if (r.type != detail::type_name_of(cudagraph_captured{})) return;
  auto c = decode_record<cudagraph_captured>(r);
  if (!c) return;
  events.push_back(
      {{"ph", "X"},
       {"cat", "capture"},
       {"name", fmt::format("capture {} {} tokens", to_string(c->graph.mode), c->graph.num_tokens)},
       {"pid", pid},
       {"tid", t.of(r.sender)},
       {"ts", micros(r.timestamp_ns - c->duration_ns)},
       {"dur", micros(c->duration_ns)},
       {"args", {{"bytes", c->bytes}, {"error", c->error}}}});
}

} // namespace

trace_json chrome_trace(const std::vector<trace_record>& records) {
  trace_json events = trace_json::array();
  tracks t;
  t.of("driver");
  std::map<uint64_t, std::pair<int64_t, int64_t>> steps; // seq -> first, last timestamp
  for (const auto& r : records) {
    add_message(r, t, events);
    add_capture(r, t, events);
    if (auto seq = record_step(r)) {
      auto [it, fresh] = steps.emplace(*seq, std::pair{r.timestamp_ns, r.timestamp_ns});
      if (!fresh) {
        it->second.first = std::min(it->second.first, r.timestamp_ns);
        it->second.second = std::max(it->second.second, r.timestamp_ns);
      }
    }
  }
  for (const auto& [seq, span] : steps)
    events.push_back({{"ph", "X"},
                      {"cat", "step"},
                      {"name", fmt::format("step {}", seq)},
                      {"pid", pid},
                      {"tid", steps_tid},
                      {"ts", micros(span.first)},
                      {"dur", std::max(1.0, micros(span.second - span.first))}});
  t.name_all(events);
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

} // namespace kvactor
