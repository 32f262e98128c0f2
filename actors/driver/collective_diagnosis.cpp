#include "actors/driver/collective_diagnosis.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kvactor {

namespace {

// Where one rank stands: its last entry, as a sortable progress and a phrase.
struct position {
  std::string key;  // equal for ranks that stand at the same place
  int64_t progress; // 2 * seq while waiting in seq, 2 * seq + 1 once seq completed
  uint64_t seq = 0;
  bool waiting = false;
  std::string singular, plural; // "waits in ..." / "wait in ..."
};

std::string shape(const collective_entry& e) {
  if (e.op == "barrier" || e.dtype.empty()) return "";
  return fmt::format("{} {}", e.count, e.dtype);
}

position position_of(const std::vector<collective_entry>& entries) {
  if (entries.empty())
    return {"none", 0, 0, false, "has entered no collective", "have entered no collective"};
  const auto& e = entries.back();
  const auto what = shape(e);
  if (e.completed()) {
    const auto at =
        fmt::format("{} #{} ({}{}completed)", e.op, e.seq, what, what.empty() ? "" : ", ");
    return {"done " + at,  static_cast<int64_t>(2 * e.seq + 1), e.seq, false, "is at " + at,
            "are at " + at};
  }
  const auto in = what.empty() ? fmt::format("{} #{}", e.op, e.seq)
                               : fmt::format("{} #{} ({})", e.op, e.seq, what);
  return {"in " + in,     static_cast<int64_t>(2 * e.seq), e.seq, true, "waits in " + in,
          "wait in " + in};
}

std::string ranks_phrase(const std::vector<int32_t>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

} // namespace

std::string diagnose_collectives(const std::vector<rank_ledger>& ledgers) {
  struct group {
    position where;
    std::vector<int32_t> ranks;
  };
  std::map<std::string, group> by_key;
  std::vector<std::string> silent;
  for (const auto& l : ledgers) {
    if (!l.answered) {
      silent.push_back(fmt::format("rank {} did not answer ({})", l.rank, l.no_answer));
      continue;
    }
    auto p = position_of(l.entries);
    auto& g = by_key[p.key];
    g.where = p;
    g.ranks.push_back(l.rank);
  }
  std::vector<group> groups;
  for (auto& [key, g] : by_key) {
    std::sort(g.ranks.begin(), g.ranks.end());
    groups.push_back(std::move(g));
  }
  // The reference: the largest group, then the most advanced one.
  std::sort(groups.begin(), groups.end(), [](const group& a, const group& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() > b.ranks.size();
    return a.where.progress > b.where.progress;
  });
  std::vector<std::string> parts;
  auto phrase = [](const group& g) {
    return fmt::format("{} {}", ranks_phrase(g.ranks),
                       g.ranks.size() == 1 ? g.where.singular : g.where.plural);
  };
  if (groups.size() == 1 && !groups.front().ranks.empty()) {
    const auto& g = groups.front();
    parts.push_back(ledgers.size() == 1 || g.ranks.size() == 1
                        ? phrase(g)
                        : fmt::format("every rank {}: none diverged (the collective itself "
                                      "stalled, or a rank stopped inside it)",
                                      g.where.singular));
  } else if (!groups.empty()) {
    const auto& ref = groups.front();
    std::vector<const group*> diverged;
    for (size_t i = 1; i < groups.size(); ++i)
      diverged.push_back(&groups[i]);
    std::sort(diverged.begin(), diverged.end(),
              [](const group* a, const group* b) { return a->ranks.front() < b->ranks.front(); });
    for (const auto* g : diverged) {
      auto text = phrase(*g);
      if (ref.where.waiting && g->where.seq > 0 && g->where.progress < ref.where.progress)
        text += fmt::format(" and has not entered #{}", ref.where.seq);
      parts.push_back(std::move(text));
    }
    parts.push_back(phrase(ref));
  }
  for (auto& s : silent)
    parts.push_back(std::move(s));
  if (parts.empty()) return "no rank reported a collective ledger";
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string root_failure(const std::vector<std::pair<int32_t, std::string>>& failures,
                         const std::vector<rank_ledger>& ledgers) {
  for (const auto& [rank, message] : failures) {
    const auto at = std::find_if(ledgers.begin(), ledgers.end(),
                                 [r = rank](const rank_ledger& l) { return l.rank == r; });
    if (at == ledgers.end() || !at->answered || at->entries.empty()) continue;
    const auto last = at->entries.back().status;
    if (last == collective_status::timed_out || last == collective_status::failed) return message;
  }
  return failures.empty() ? std::string{} : failures.front().second;
}

collective_outcomes count_collective_outcomes(const std::vector<rank_ledger>& ledgers) {
  collective_outcomes out;
  for (const auto& l : ledgers) {
    if (!l.answered || l.entries.empty()) continue;
    const auto status = l.entries.back().status;
    out.timed_out += status == collective_status::timed_out;
    out.failed += status == collective_status::failed;
  }
  return out;
}

} // namespace kvactor
