#include "actors/driver/step_replies.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvactor {

bool step_replies::first_answer(int32_t rank) {
  collective_failed_now_ = false;
  if (closed_ || rank < 0 || static_cast<size_t>(rank) >= answered_.size()) return false;
  if (answered_[static_cast<size_t>(rank)]) return false;
  answered_[static_cast<size_t>(rank)] = true;
  return true;
}

// A collective failure closes the step at its first error, while a peer's may be on its way: the
// one whose collective timed out can arrive after the one that only saw the abort.
// Who answered stays as it was at close(): only the list of errors grows.
void step_replies::keep_late_failure(int32_t rank, const std::string& message) {
  collective_failed_now_ = false;
  if (rank < 0 || static_cast<size_t>(rank) >= answered_.size()) return;
  if (answered_[static_cast<size_t>(rank)]) return;
  const bool kept = std::any_of(failures_.begin(), failures_.end(),
                                [rank](const auto& f) { return f.first == rank; });
  if (!kept) failures_.emplace_back(rank, message);
}

bool step_replies::answered(int32_t rank) const {
  return rank >= 0 && static_cast<size_t>(rank) < answered_.size()
         && answered_[static_cast<size_t>(rank)];
}

std::vector<int32_t> step_replies::silent() const {
  std::vector<int32_t> out;
  for (size_t r = 0; r < answered_.size(); ++r)
    if (!answered_[r]) out.push_back(static_cast<int32_t>(r));
  return out;
}

bool step_replies::on_done(int32_t rank, step_done done) {
  if (!first_answer(rank)) return false;
  done_.push_back(std::move(done));
  return --pending_ == 0;
}

bool step_replies::on_error(int32_t rank, error err, std::vector<uint64_t> request_ids) {
  if (closed_) {
    keep_late_failure(rank, err.message);
    return false;
  }
  if (!first_answer(rank)) return false;
  failures_.emplace_back(rank, err.message);
  collective_failed_now_ = !collective_failed_ && err.code == errc::collective_failed;
  collective_failed_ = collective_failed_ || collective_failed_now_;
  if (!first_error_) {
    first_error_ = std::move(err);
    first_error_ids_ = std::move(request_ids);
  }
  return --pending_ == 0;
}

namespace {

std::set<uint64_t> scheduled_ids(const step_plan& plan) {
  std::set<uint64_t> out;
  for (const auto& s : plan.scheduled)
    out.insert(s.request_id);
  return out;
}

step_verdict on_rejected(const step_plan& plan, const error& err,
                         const std::vector<uint64_t>& ids) {
  step_verdict v;
  v.why = err.message;
  v.failed = ids.empty() ? scheduled_ids(plan) : std::set<uint64_t>(ids.begin(), ids.end());
  if (err.code == errc::step_failed || err.code == errc::collective_failed)
    v.what = step_verdict::action::consumed; // failed after it was applied
  else
    v.what = ids.empty() ? step_verdict::action::reject : step_verdict::action::resend;
  return v;
}

} // namespace

step_verdict step_replies::verdict(const step_plan& plan) const {
  if (first_error_) return on_rejected(plan, *first_error_, first_error_ids_);
  step_verdict v;
  v.what = step_verdict::action::apply;
  if (done_.empty()) return v;
  // Rank 0's reply (whichever arrived first) is applied; the ranks compute replicated samples,
  // so a disagreement is a bug worth failing loudly.
  const auto& ref = *std::min_element(done_.begin(), done_.end(),
                                      [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (const auto& d : done_)
    if (d.sampled != ref.sampled) {
      v.failed = scheduled_ids(plan);
      v.why = fmt::format("rank {} sampled other tokens than rank {} at step {}", d.rank, ref.rank,
                          plan.seq);
      break;
    }
  v.done = ref;
  return v;
}

step_plan without(step_plan plan, const std::set<uint64_t>& ids) {
  auto out = [&](uint64_t id) { return ids.count(id) > 0; };
  std::erase_if(plan.new_requests, [&](const new_request& r) { return out(r.request_id); });
  std::erase_if(plan.block_updates, [&](const block_table_update& u) { return out(u.request_id); });
  std::erase_if(plan.scheduled, [&](const scheduled_request& s) { return out(s.request_id); });
  for (auto id : ids)
    plan.finished_requests.push_back(id);
  return plan;
}

} // namespace kvactor
