#include "actors/driver/scheduler.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace kvactor {

namespace {

using st = request_state::status;

error invalid(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

} // namespace

status scheduler::validate(const scheduler_config& cfg, const std::vector<kv_cache_group>& groups,
                           int64_t num_blocks) {
  if (cfg.max_num_seqs < 1) return invalid(fmt::format("max_num_seqs = {} < 1", cfg.max_num_seqs));
  if (cfg.max_num_batched_tokens < 1)
    return invalid(fmt::format("max_num_batched_tokens = {} < 1", cfg.max_num_batched_tokens));
  if (cfg.max_model_len < 1)
    return invalid(fmt::format("max_model_len = {} < 1", cfg.max_model_len));
  if (cfg.num_ubatches < 1) return invalid(fmt::format("num_ubatches = {} < 1", cfg.num_ubatches));
  if (num_blocks < 1 || num_blocks > std::numeric_limits<int32_t>::max())
    return invalid(fmt::format("num_blocks = {} outside [1, {}]", num_blocks,
                               std::numeric_limits<int32_t>::max()));
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].spec.block_size < 1)
      return invalid(
          fmt::format("groups[{}].spec.block_size = {} < 1", g, groups[g].spec.block_size));
  return ok();
}

scheduler::scheduler(scheduler_config cfg, std::vector<kv_cache_group> groups, int64_t num_blocks)
    : cfg_(cfg), prefix_block_size_(groups.empty() ? 1 : groups.front().spec.block_size),
      pool_(static_cast<int32_t>(
          std::clamp<int64_t>(num_blocks, 1, std::numeric_limits<int32_t>::max()))),
      blocks_(std::move(groups), pool_) {
  assert(validate(cfg_, {}, num_blocks));
  blocks_.set_prefix_caching(cfg_.enable_prefix_caching);
}

status scheduler::check_sampling(const sampling_params& p) const {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return invalid(
        fmt::format("sampling.temperature = {} is not a finite number >= 0", p.temperature));
  if (p.top_k < 0) return invalid(fmt::format("sampling.top_k = {} < 0", p.top_k));
  if (!(p.top_p > 0 && p.top_p <= 1))
    return invalid(fmt::format("sampling.top_p = {} is outside (0, 1]", p.top_p));
  if (p.logprobs < -1 || p.logprobs > max_logprobs)
    return invalid(fmt::format("sampling.logprobs = {} is outside [-1, {}] (-1: none)", p.logprobs,
                               max_logprobs));
  for (auto t : p.stop_token_ids)
    if (t < 0 || (cfg_.vocab_size > 0 && t >= cfg_.vocab_size))
      return invalid(fmt::format("sampling.stop_token_ids: {} is outside the model's vocabulary "
                                 "[0, {})",
                                 t, cfg_.vocab_size));
  return ok();
}

status scheduler::check_request(const std::vector<int32_t>& prompt, int32_t max_output_tokens,
                                const sampling_params& sampling) const {
  if (auto ok = check_sampling(sampling); !ok) return ok;
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  const auto bad_token = std::find_if(prompt.begin(), prompt.end(), [&](int32_t t) {
    return t < 0 || (cfg_.vocab_size > 0 && t >= cfg_.vocab_size);
  });
  if (prompt.empty()) return invalid("prompt is empty");
  if (bad_token != prompt.end())
    return invalid(fmt::format("prompt[{}] = {} is outside the model's vocabulary [0, {})",
                               bad_token - prompt.begin(), *bad_token, cfg_.vocab_size));
  if (max_output_tokens < 1)
    return invalid(fmt::format("max_output_tokens = {} < 1", max_output_tokens));
  if (prompt_len >= cfg_.max_model_len)
    return invalid(
        fmt::format("prompt_len = {} >= max_model_len = {}", prompt_len, cfg_.max_model_len));
  // The last sampled token is never fed, so the cache holds at most final length - 1 tokens.
  const int64_t final_len = std::min(prompt_len + max_output_tokens, cfg_.max_model_len);
  const int64_t peak = blocks_.peak_blocks(final_len - 1, cfg_.max_num_batched_tokens);
  if (peak > pool_.capacity())
    return make_error(errc::insufficient_memory,
                      fmt::format("needs up to {} blocks for {} tokens, the pool holds {}", peak,
                                  final_len - 1, pool_.capacity()));
  return ok();
}

status scheduler::add_request(uint64_t id, std::vector<int32_t> prompt, int32_t max_output_tokens,
                              sampling_params sampling) {
  if (requests_.count(id) != 0)
    return invalid(fmt::format("add_request: request_id = {} already exists", id));
  auto checked = check_request(prompt, max_output_tokens, sampling);
  auto& r = requests_[id];
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_output_tokens = max_output_tokens;
  r.sampling = std::move(sampling);
  order_.push_back(id);
  if (!checked) {
    r.failure = checked.err().message;
    r.st = st::failed;
    ++num_failed_;
    retired_.push_back(id);
    return make_error(checked.err().code,
                      fmt::format("add_request: request {}: {}", id, r.failure));
  }
  waiting_.push_back(id);
  return ok();
}

expected<step_plan> scheduler::schedule(uint64_t seq, uint64_t epoch) {
  // A plan whose requests all failed since (the ranks rejected it) is abandoned, not awaited.
  auto still_running = [&](uint64_t id) { return running_request(id) != nullptr; };
  if (last_ && !last_->applied
      && std::any_of(last_->scheduled.begin(), last_->scheduled.end(), still_running))
    return invalid(fmt::format(
        "schedule: step_plan seq = {} has not been applied yet (seq = {} asked)", last_->seq, seq));
  step_plan plan;
  plan.seq = seq;
  plan.epoch = epoch;
  plan.num_ubatches = cfg_.num_ubatches;
  int32_t budget = cfg_.max_num_batched_tokens;
  std::vector<pick> picks;
  // vLLM v1 admits nothing in a step that had to preempt: the pool is already too tight.
  if (!schedule_running(budget, picks, plan)) admit_waiting(budget, picks, plan);

  plan_record rec{seq, epoch, {}, {}, false};
  for (const auto& p : picks) {
    rec.scheduled.push_back(p.id);
    auto& r = requests_.at(p.id);
    scheduled_request s{p.id, r.num_computed_tokens,
                        tokens_between(r, r.num_computed_tokens, p.num_tokens), false};
    r.num_computed_tokens += p.num_tokens;
    s.sample = r.num_computed_tokens == num_tokens(r);
    if (s.sample) rec.sampled.push_back(p.id);
    plan.scheduled.push_back(std::move(s));
  }
  std::stable_partition(plan.scheduled.begin(), plan.scheduled.end(),
                        [](const scheduled_request& s) { return s.token_ids.size() == 1; });
  plan.finished_requests = std::move(pending_finished_);
  pending_finished_.clear();
  last_ = std::move(rec);
  return plan;
}

bool scheduler::schedule_running(int32_t& budget, std::vector<pick>& picks, step_plan& plan) {
  bool preempted = false;
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    auto& r = requests_.at(running_[i]);
    int32_t n = std::min(num_uncomputed_tokens(r), budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool fits = false;
    for (;;) {
      auto updates =
          blocks_.allocate(r.id, r.num_computed_tokens, int64_t{r.num_computed_tokens} + n);
      if (updates) {
        plan.block_updates.insert(plan.block_updates.end(), updates->begin(), updates->end());
        fits = true;
        break;
      }
      if (running_.size() == 1) {
        // Alone with the whole pool and still no room: recomputing would end here again.
        retire(r, st::failed);
        r.failure = "the pool cannot hold its blocks even with no other request running";
        break;
      }
      auto victim = running_.back();
      preempt(victim);
      preempted = true;
      if (victim == r.id) break;
    }
    if (!fits) break; // r was the last running request
    picks.push_back({r.id, n});
    budget -= n;
    ++i;
  }
  return preempted;
}

// A request's prefix chain, hashed once per token count: a burst of thousands of waiting requests
// is looked at every step while they are held.
const std::vector<block_hash>& scheduler::prefix_chain(const request_state& r) const {
  auto& cached = chains_[r.id];
  if (cached.first != num_tokens(r))
    cached = {num_tokens(r),
              prefix_hold::chain_of(tokens_between(r, 0, num_tokens(r)), prefix_block_size_)};
  return cached.second;
}

// Blocks that running requests still in their prefill will compute (for in-batch sharing).
prefix_hold scheduler::computing_prefixes() const {
  prefix_hold hold;
  if (!blocks_.caches_prefixes()) return hold;
  for (auto id : running_) {
    const auto& r = requests_.at(id);
    if (r.num_computed_tokens >= num_tokens(r) - 1) continue; // past its prefill
    hold.add_computing(prefix_chain(r), pool_);
  }
  return hold;
}

void scheduler::admit_waiting(int32_t& budget, std::vector<pick>& picks, step_plan& plan) {
  prefix_hold hold = computing_prefixes();
  for (size_t i = 0; i < waiting_.size() && budget > 0
                     && running_.size() < static_cast<size_t>(cfg_.max_num_seqs);) {
    auto& r = requests_.at(waiting_[i]);
    const std::vector<block_hash>* chain = nullptr; // stable: chains_ is node-based
    if (blocks_.caches_prefixes() && r.num_computed_tokens == 0) {
      chain = &prefix_chain(r);
      // A preempted request keeps its place at the front: it is never held.
      if (r.num_preemptions == 0
          && hold.waits_for_computing(*chain)) { // admitted once those blocks are cached
        ++i;
        continue;
      }
    }
    const auto admitted = admit(r, budget, picks, plan);
    if (admitted == admission::wait) break;      // wait for running requests to free blocks
    if (admitted == admission::failed) continue; // retire() took it out of waiting_
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    if (chain != nullptr) hold.add_computing(*chain, pool_);
  }
}

// One waiting request into the running set, past the prefix the cache holds.
scheduler::admission scheduler::admit(request_state& r, int32_t& budget, std::vector<pick>& picks,
                                      step_plan& plan) {
  // A prefix the cache holds starts the request past it; at least its last token is computed
  // again, so that the step samples from a logit (vLLM does the same).
  std::vector<block_table_update> hit_updates;
  const auto hit =
      static_cast<int32_t>(r.num_computed_tokens == 0 ? take_cached_prefix(r, hit_updates) : 0);
  r.num_computed_tokens += hit;
  int32_t n = std::min(num_uncomputed_tokens(r), budget);
  auto updates = blocks_.allocate(r.id, r.num_computed_tokens, int64_t{r.num_computed_tokens} + n);
  if (!updates && hit > 0) { // give the hits back: it waits, or fails, holding nothing
    blocks_.free(r.id);
    r.num_computed_tokens = 0;
  }
  if (!updates) {
    if (!running_.empty()) return admission::wait;
    // Waiting requests hold no blocks, so the whole pool was free: it can never start.
    retire(r, st::failed);
    r.failure = "the pool cannot hold its first chunk even when empty";
    return admission::failed;
  }
  running_.push_back(r.id);
  r.st = st::running;
  known_.insert(r.id);
  // After a preemption the ranks see prompt + output as the prompt, and only what is left.
  plan.new_requests.push_back({r.id, num_tokens(r),
                               r.max_output_tokens - static_cast<int32_t>(r.output.size()),
                               r.sampling, hit});
  plan.block_updates.insert(plan.block_updates.end(), hit_updates.begin(), hit_updates.end());
  plan.block_updates.insert(plan.block_updates.end(), updates->begin(), updates->end());
  num_prefix_hit_tokens_ += hit;
  picks.push_back({r.id, n});
  budget -= n;
  return admission::admitted;
}

int64_t scheduler::take_cached_prefix(request_state& r, std::vector<block_table_update>& updates) {
  if (!blocks_.caches_prefixes()) return 0;
  const std::vector<int32_t> tokens = tokens_between(r, 0, num_tokens(r));
  return blocks_.take_cached_prefix(r.id, tokens, num_tokens(r) - 1, updates);
}

void scheduler::preempt(uint64_t id) {
  auto& r = requests_.at(id);
  blocks_.free(id);
  std::erase(running_, id);
  if (known_.erase(id) != 0) pending_finished_.push_back(id);
  r.st = st::waiting;
  r.num_computed_tokens = 0;
  ++r.num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(id);
}

void scheduler::retire(request_state& r, request_state::status s) {
  chains_.erase(r.id);
  blocks_.free(r.id);
  std::erase(running_, r.id);
  std::erase(waiting_, r.id);
  if (known_.erase(r.id) != 0) pending_finished_.push_back(r.id);
  r.st = s;
  if (s == st::finished) ++num_finished_;
  if (s == st::failed) ++num_failed_;
  retired_.push_back(r.id);
}

request_state* scheduler::running_request(uint64_t id) {
  auto it = requests_.find(id);
  return it != requests_.end() && it->second.st == st::running ? &it->second : nullptr;
}

std::vector<uint64_t> scheduler::take_retired() {
  return std::exchange(retired_, {});
}

void scheduler::forget(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || !is_done(it->second)) return;
  requests_.erase(it);
  std::erase(order_, id);
  chains_.erase(id);
}

status scheduler::apply(const step_done& done) {
  if (!last_) return invalid("apply: no step_plan has been produced yet");
  if (done.seq != last_->seq)
    return invalid(fmt::format("apply: step_done.seq = {} does not match the last plan's seq = {}",
                               done.seq, last_->seq));
  if (done.epoch != last_->epoch)
    return invalid(
        fmt::format("apply: step_done.epoch = {} does not match the last plan's epoch = {}",
                    done.epoch, last_->epoch));
  if (last_->applied)
    return invalid(fmt::format("apply: step_done.seq = {} was already applied", done.seq));
  const auto& expect = last_->sampled;
  std::unordered_set<uint64_t> seen;
  for (const auto& s : done.sampled) {
    if (std::find(expect.begin(), expect.end(), s.request_id) == expect.end())
      return invalid(fmt::format("apply: step_done.sampled.request_id = {} is unknown: not "
                                 "sampled in step seq = {}",
                                 s.request_id, done.seq));
    if (!seen.insert(s.request_id).second)
      return invalid(
          fmt::format("apply: step_done.sampled.request_id = {} is listed twice", s.request_id));
  }
  for (auto id : expect)
    if (seen.count(id) == 0 && running_request(id) != nullptr)
      return invalid(fmt::format("apply: step_done.sampled lacks request_id = {}", id));

  last_->applied = true;
  // The step ran: the blocks it filled hold their KV now, and later requests may hit them.
  if (blocks_.caches_prefixes())
    for (auto id : last_->scheduled) {
      const auto* r = running_request(id);
      if (r != nullptr && blocks_.has_uncached_full_blocks(id, r->num_computed_tokens))
        blocks_.cache_full_blocks(id, tokens_between(*r, 0, r->num_computed_tokens),
                                  r->num_computed_tokens);
    }
  for (const auto& s : done.sampled) {
    auto* found = running_request(s.request_id);
    if (found == nullptr) continue; // failed (and maybe forgotten) after the plan was made
    auto& r = *found;
    r.output.push_back(s.token);
    if (r.sampling.logprobs >= 0) r.logprobs.push_back(s.logprobs);
    const auto& stops = r.sampling.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), s.token) != stops.end()) {
      r.reason = finish_reason::stop;
      retire(r, st::finished);
    } else if (static_cast<int32_t>(r.output.size()) >= r.max_output_tokens
               || num_tokens(r) >= cfg_.max_model_len) {
      r.reason = finish_reason::length;
      retire(r, st::finished);
    }
  }
  return ok();
}

void scheduler::fail_request(uint64_t id, std::string reason) {
  auto it = requests_.find(id);
  if (it == requests_.end() || is_done(it->second)) return;
  retire(it->second, st::failed);
  it->second.failure = std::move(reason);
}

const request_state* scheduler::find(uint64_t id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

std::vector<std::vector<int32_t>> scheduler::outputs() const {
  std::vector<std::vector<int32_t>> out;
  out.reserve(order_.size());
  for (auto id : order_)
    out.push_back(requests_.at(id).output);
  return out;
}

} // namespace kvactor
