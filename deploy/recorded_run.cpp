#include "deploy/recorded_run.hpp"

#include <map>

#include <fmt/format.h>

namespace kvactor {

namespace {

int index_of(const std::string& name) {
  if (name.rfind("rank[", 0) != 0 || name.size() < 7 || name.back() != ']') return -1;
  int value = 0;
  for (size_t i = 5; i + 1 < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || value > 1'000'000) return -1;
    value = value * 10 + (name[i] - '0');
  }
  return value;
}

template <class T>
bool is(const trace_record& r) {
  return r.type == detail::type_name_of(T{});
}

struct partial_rank {
  std::optional<rank_config> config;
  std::optional<rank_plan> plan;
  std::optional<rank_ready> ready;
  recorded_rank out;
};

} // namespace

int owner_rank(const std::string& actor) {
  auto at = actor.rfind('@');
  return index_of(at == std::string::npos ? actor : actor.substr(at + 1));
}

expected<recorded_run> read_recorded_run(const std::vector<trace_record>& records) {
  std::map<int, partial_rank> ranks;
  recorded_run run;
#define KVACTOR_DECODE(T, var)                                                                     \
  auto var = decode_record<T>(r);                                                                  \
  if (!var) return var.err()
  for (const auto& r : records) {
    const int to = index_of(r.receiver);
    const int from = index_of(r.sender);
    const int inner = r.sender.find('@') != std::string::npos     ? owner_rank(r.sender)
                      : r.receiver.find('@') != std::string::npos ? owner_rank(r.receiver)
                                                                  : -1;
    if (is<rank_config>(r) && to >= 0) {
      KVACTOR_DECODE(rank_config, x);
      ranks[to].config = std::move(*x);
    } else if (is<rank_plan>(r) && from >= 0) {
      KVACTOR_DECODE(rank_plan, x);
      ranks[from].plan = std::move(*x);
    } else if (is<rank_ready>(r) && from >= 0) {
      KVACTOR_DECODE(rank_ready, x);
      ranks[from].ready = std::move(*x);
    } else if (is<step_plan>(r) && to >= 0) {
      KVACTOR_DECODE(step_plan, x);
      ranks[to].out.steps.push_back({r.index, std::move(*x), std::nullopt, std::nullopt, {}});
    } else if ((is<step_done>(r) || is<step_rejected>(r)) && from >= 0) {
      auto& steps = ranks[from].out.steps;
      if (steps.empty() || steps.back().done || steps.back().rejected)
        return make_error(errc::parse_error,
                          fmt::format("record {} ({}): a reply from {} without its step_plan",
                                      r.index, r.type, r.sender));
      if (is<step_done>(r)) {
        KVACTOR_DECODE(step_done, x);
        steps.back().done = std::move(*x);
      } else {
        KVACTOR_DECODE(step_rejected, x);
        steps.back().rejected = std::move(*x);
      }
    } else if (is<cudagraph_request>(r) && inner >= 0) {
      KVACTOR_DECODE(cudagraph_request, x);
      ranks[inner].out.graph_request = std::move(*x);
    } else if (is<cudagraph_plan>(r) && inner >= 0) {
      KVACTOR_DECODE(cudagraph_plan, x);
      ranks[inner].out.graph_plan = std::move(*x);
    } else if (is<cudagraph_captured>(r) && inner >= 0 && ranks[inner].out.steps.empty()) {
      KVACTOR_DECODE(cudagraph_captured, x);
      ranks[inner].out.startup_captures.push_back(std::move(*x));
    } else if (inner >= 0) {
      auto& steps = ranks[inner].out.steps;
      if (steps.empty())
        return make_error(errc::parse_error,
                          fmt::format("record {} ({} from {} to {}): before any step", r.index,
                                      r.type, r.sender, r.receiver));
      steps.back().inner.push_back(r);
    } else if (is<request_spec>(r) && r.sender == "client") {
      KVACTOR_DECODE(request_spec, x);
      run.requests.push_back(std::move(*x));
    } else if (is<run_summary>(r) && r.receiver == "client") {
      KVACTOR_DECODE(run_summary, x);
      run.summary = std::move(*x);
    }
  }
#undef KVACTOR_DECODE
  if (ranks.empty())
    return make_error(errc::parse_error, "no rank_config records: not a recorded run");
  const int world = ranks.rbegin()->first + 1;
  for (int i = 0; i < world; ++i) {
    auto it = ranks.find(i);
    if (it == ranks.end() || !it->second.config || !it->second.plan || !it->second.ready)
      return make_error(errc::parse_error,
                        fmt::format("rank {} has no recorded start-up (rank_config, rank_plan and "
                                    "rank_ready)",
                                    i));
    auto& p = it->second;
    p.out.config = std::move(*p.config);
    p.out.plan = std::move(*p.plan);
    p.out.ready = std::move(*p.ready);
    run.ranks.push_back(std::move(p.out));
  }
  return run;
}

} // namespace kvactor
