#include "actors/rank/step_state.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace kvactor {

namespace {

step_rejection reject(std::string message, std::vector<uint64_t> ids = {}) {
  return {make_error(errc::invalid_argument, std::move(message)), std::move(ids)};
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

} // namespace

step_state::step_state(std::vector<group_geometry> groups, int64_t num_blocks,
                       int64_t max_model_len, int32_t max_num_batched_tokens, int32_t max_num_seqs)
    : groups_(std::move(groups)), num_blocks_(num_blocks), max_model_len_(max_model_len),
      max_num_batched_tokens_(max_num_batched_tokens), max_num_seqs_(max_num_seqs) {
  widths_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& geo = groups_[g];
    const int64_t manager_blocks = geo.positional ? ceil_div(max_model_len_, geo.block_size) : 1;
    widths_[g] = static_cast<int32_t>(manager_blocks * (geo.block_size / geo.kernel_block_size));
  }
}

// What a plan changes, as validate() sees it before anything is applied: whether it starts a new
// life, the requests it finishes and admits, and copies of the block tables its updates touch.
struct step_state::plan_view {
  plan_view(const step_state& state, const step_plan& plan)
      : st(state), new_life(state.starts_new_life(plan)),
        finished(plan.finished_requests.begin(), plan.finished_requests.end()) {}

  const step_state& st;
  bool new_life = false;
  std::set<uint64_t> finished;
  std::map<uint64_t, int32_t> admitted; // id -> num_cached_tokens (where its first chunk starts)
  std::map<std::pair<uint64_t, int32_t>, std::vector<int32_t>> touched;

  // Held before the plan and not finished by it (a new life holds nothing).
  bool alive_before(uint64_t id) const {
    return !new_life && st.requests_.count(id) > 0 && finished.count(id) == 0;
  }
  // Alive after this plan's removals and admissions.
  bool known(uint64_t id) const { return alive_before(id) || admitted.count(id) > 0; }
  // The block table as the updates checked so far leave it.
  const std::vector<int32_t>& table_of(uint64_t id, int32_t g) const {
    static const std::vector<int32_t> empty;
    if (auto it = touched.find({id, g}); it != touched.end()) return it->second;
    if (!alive_before(id)) return empty;
    return st.requests_.at(id).tables[static_cast<size_t>(g)];
  }
};

std::optional<step_rejection> step_state::validate(const step_plan& plan) const {
  if (auto r = check_sequence(plan)) return r;
  if (plan.num_ubatches < 1 || plan.num_ubatches > 2)
    return reject(fmt::format("num_ubatches: {} is not 1 or 2", plan.num_ubatches));
  plan_view view{*this, plan};
  if (auto r = check_new_requests(plan, view)) return r;
  if (auto r = check_block_updates(plan, view)) return r;
  // Scheduled work: no duplicates, known requests, matching progress, covered positions, within
  // the limits.
  if (auto r = check_duplicates(plan)) return r;
  int64_t total = 0;
  for (const auto& s : plan.scheduled) {
    if (auto r = check_scheduled(s, view)) return r;
    total += static_cast<int64_t>(s.token_ids.size());
  }
  return check_limits(plan, total);
}

// Sequence and epoch: a new epoch is a new life of the ranks and starts at seq 0.
std::optional<step_rejection> step_state::check_sequence(const step_plan& plan) const {
  if (started_ && plan.epoch < epoch_)
    return reject(fmt::format("epoch: {} is stale (this rank is in epoch {})", plan.epoch, epoch_));
  const uint64_t expected_seq = starts_new_life(plan) ? 0 : next_seq_;
  if (plan.seq != expected_seq)
    return reject(
        plan.seq < expected_seq
            ? fmt::format("seq: step {} was already executed (expected {})", plan.seq, expected_seq)
            : fmt::format("seq: gap, got step {} but expected {}", plan.seq, expected_seq));
  return std::nullopt;
}

std::optional<step_rejection> step_state::check_new_requests(const step_plan& plan,
                                                             plan_view& view) const {
  for (const auto& r : plan.new_requests) {
    if (view.alive_before(r.request_id) || view.admitted.count(r.request_id) > 0)
      return reject(fmt::format("new_requests: request {} is already active", r.request_id),
                    {r.request_id});
    if (r.prompt_len <= 0 || r.prompt_len >= max_model_len_ || r.max_output_tokens < 0)
      return reject(fmt::format("new_requests: request {} has prompt_len {} / max_output_tokens "
                                "{} (prompt_len must be in [1, {}))",
                                r.request_id, r.prompt_len, r.max_output_tokens, max_model_len_),
                    {r.request_id});
    if (r.num_cached_tokens < 0 || r.num_cached_tokens >= r.prompt_len)
      return reject(fmt::format("new_requests: request {} has num_cached_tokens {} (must be in "
                                "[0, prompt_len {}))",
                                r.request_id, r.num_cached_tokens, r.prompt_len),
                    {r.request_id});
    view.admitted.emplace(r.request_id, r.num_cached_tokens);
  }
  return std::nullopt;
}

// Block table updates, applied to copies of the tables they touch.
std::optional<step_rejection> step_state::check_block_updates(const step_plan& plan,
                                                              plan_view& view) const {
  for (const auto& u : plan.block_updates) {
    if (!view.known(u.request_id))
      return reject(fmt::format("block_updates: unknown request {}", u.request_id), {u.request_id});
    if (u.group_id < 0 || static_cast<size_t>(u.group_id) >= groups_.size())
      return reject(fmt::format("block_updates: group_id {} of request {} is outside [0, {})",
                                u.group_id, u.request_id, groups_.size()),
                    {u.request_id});
    auto table = view.table_of(u.request_id, u.group_id);
    if (u.start < 0 || static_cast<size_t>(u.start) > table.size())
      return reject(fmt::format("block_updates: start {} of request {} (group {}) leaves a gap "
                                "after {} blocks",
                                u.start, u.request_id, u.group_id, table.size()),
                    {u.request_id});
    for (auto id : u.block_ids)
      if (id < 0 || id >= num_blocks_)
        return reject(fmt::format("block_updates: block id {} of request {} (group {}) is "
                                  "outside [0, {})",
                                  id, u.request_id, u.group_id, num_blocks_),
                      {u.request_id});
    if (table.size() < u.start + u.block_ids.size()) table.resize(u.start + u.block_ids.size());
    std::copy(u.block_ids.begin(), u.block_ids.end(), table.begin() + u.start);
    view.touched[{u.request_id, u.group_id}] = std::move(table);
  }
  return std::nullopt;
}

// Duplicates: sorted ids in a buffer reused step after step (no tree allocations per step).
std::optional<step_rejection> step_state::check_duplicates(const step_plan& plan) const {
  seen_.clear();
  for (const auto& s : plan.scheduled)
    seen_.push_back(s.request_id);
  std::sort(seen_.begin(), seen_.end());
  if (auto dup = std::adjacent_find(seen_.begin(), seen_.end()); dup != seen_.end())
    return reject(fmt::format("scheduled: request {} appears twice", *dup), {*dup});
  return std::nullopt;
}

std::optional<step_rejection> step_state::check_scheduled(const scheduled_request& s,
                                                          const plan_view& view) const {
  if (!view.known(s.request_id))
    return reject(fmt::format("scheduled: unknown request {}", s.request_id), {s.request_id});
  const auto admitted = view.admitted.find(s.request_id);
  const int32_t computed =
      admitted != view.admitted.end() ? admitted->second : requests_.at(s.request_id).num_computed;
  if (s.num_computed_tokens != computed)
    return reject(fmt::format("scheduled: request {} has num_computed_tokens {}, this rank has "
                              "{}",
                              s.request_id, s.num_computed_tokens, computed),
                  {s.request_id});
  if (s.token_ids.empty())
    return reject(fmt::format("scheduled: request {} has no tokens", s.request_id), {s.request_id});
  const int64_t end = int64_t{computed} + static_cast<int64_t>(s.token_ids.size());
  if (end > max_model_len_)
    return reject(fmt::format("scheduled: request {} reaches position {} beyond max_model_len "
                              "{}",
                              s.request_id, end, max_model_len_),
                  {s.request_id});
  return check_coverage(s.request_id, computed, end, view);
}

// Every position in [computed, end) has a block in every group's table (state groups: the
// one block of the request).
std::optional<step_rejection> step_state::check_coverage(uint64_t id, int32_t computed, int64_t end,
                                                         const plan_view& view) const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto& table = view.table_of(id, static_cast<int32_t>(g));
    const int64_t last_block = groups_[g].positional ? (end - 1) / groups_[g].block_size : 0;
    const int64_t first_block = groups_[g].positional ? computed / groups_[g].block_size : 0;
    for (int64_t b = first_block; b <= last_block; ++b)
      if (b >= static_cast<int64_t>(table.size()) || table[static_cast<size_t>(b)] == 0)
        return reject(fmt::format("block_updates: the block table of request {} (group {}) "
                                  "does not cover position {}",
                                  id, g, b * groups_[g].block_size),
                      {id});
  }
  return std::nullopt;
}

std::optional<step_rejection> step_state::check_limits(const step_plan& plan, int64_t total) const {
  if (plan.scheduled.size() > static_cast<size_t>(max_num_seqs_))
    return reject(fmt::format("scheduled: {} requests exceed max_num_seqs {}",
                              plan.scheduled.size(), max_num_seqs_));
  if (total > max_num_batched_tokens_)
    return reject(fmt::format("scheduled: {} tokens exceed max_num_batched_tokens {}", total,
                              max_num_batched_tokens_));
  return std::nullopt;
}

void step_state::apply(const step_plan& plan, step_batch& b) {
  if (!started_ || plan.epoch > epoch_) requests_.clear();
  started_ = true;
  epoch_ = plan.epoch;
  next_seq_ = plan.seq + 1;
  for (auto id : plan.finished_requests)
    requests_.erase(id);
  for (const auto& r : plan.new_requests) {
    request req;
    req.prompt_len = r.prompt_len;
    req.max_output_tokens = r.max_output_tokens;
    req.sampling = r.sampling;
    req.num_computed = r.num_cached_tokens;
    req.tables.resize(groups_.size());
    requests_[r.request_id] = std::move(req);
  }
  for (const auto& u : plan.block_updates) {
    auto& table = requests_.at(u.request_id).tables[static_cast<size_t>(u.group_id)];
    if (table.size() < u.start + u.block_ids.size()) table.resize(u.start + u.block_ids.size());
    std::copy(u.block_ids.begin(), u.block_ids.end(), table.begin() + u.start);
  }
  b.seq = plan.seq;
  b.widths = widths_;
  b.block_rows.resize(groups_.size());
  b.request_ids.clear();
  b.token_ids.clear();
  b.positions.clear();
  b.query_start_loc.assign(1, 0);
  b.seq_lens.clear();
  b.is_prefilling.clear();
  b.sample_rows.clear();
  b.sample_ids.clear();
  b.sample_params.clear();
  b.sample_positions.clear();
  b.max_query_len = 0;
  b.max_seq_len = 0;
  const auto num_reqs = plan.scheduled.size();
  for (size_t g = 0; g < groups_.size(); ++g)
    b.block_rows[g].assign(num_reqs * static_cast<size_t>(b.widths[g]), 0);
  for (size_t i = 0; i < num_reqs; ++i) {
    const auto& s = plan.scheduled[i];
    auto& req = requests_.at(s.request_id);
    const auto n = static_cast<int32_t>(s.token_ids.size());
    b.request_ids.push_back(s.request_id);
    for (int32_t t = 0; t < n; ++t) {
      b.token_ids.push_back(s.token_ids[static_cast<size_t>(t)]);
      b.positions.push_back(req.num_computed + t);
    }
    // Prefilling: this step still feeds prompt tokens (computed before it < prompt length).
    const bool prefilling = req.num_computed < req.prompt_len;
    req.num_computed += n;
    b.query_start_loc.push_back(b.query_start_loc.back() + n);
    b.seq_lens.push_back(req.num_computed);
    b.is_prefilling.push_back(prefilling);
    b.max_query_len = std::max(b.max_query_len, n);
    b.max_seq_len = std::max(b.max_seq_len, req.num_computed);
    if (s.sample) {
      b.sample_rows.push_back(b.query_start_loc.back() - 1);
      b.sample_ids.push_back(s.request_id);
      b.sample_params.push_back(req.sampling);
      b.sample_positions.push_back(req.num_computed);
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
      // Manager block m covers kernel blocks m * ratio + k.
      const int32_t ratio = groups_[g].block_size / groups_[g].kernel_block_size;
      auto* row = b.block_rows[g].data() + i * static_cast<size_t>(b.widths[g]);
      const auto& table = req.tables[g];
      for (size_t m = 0; m < table.size(); ++m)
        for (int32_t k = 0; k < ratio; ++k) {
          const size_t at = m * static_cast<size_t>(ratio) + static_cast<size_t>(k);
          // The null block stays null whatever the split (released sliding-window blocks).
          if (at < static_cast<size_t>(b.widths[g]))
            row[at] = table[m] == 0 ? 0 : table[m] * ratio + k;
        }
    }
  }
}

} // namespace kvactor
