#include "actors/node/step_relay.hpp"

#include <algorithm>
#include <utility>

namespace kvactor {

step_relay::step_relay(uint64_t seq, std::vector<int32_t> ranks)
    : ranks_(std::move(ranks)), answered_(ranks_.size(), false), pending_(ranks_.size()) {
  out_.seq = seq;
}

bool step_relay::first_answer(int32_t rank) {
  if (taken_) return false;
  const auto it = std::find(ranks_.begin(), ranks_.end(), rank);
  if (it == ranks_.end()) return false;
  const auto i = static_cast<size_t>(it - ranks_.begin());
  if (answered_[i]) return false;
  answered_[i] = true;
  --pending_;
  return true;
}

bool step_relay::on_done(int32_t rank, step_done done) {
  if (!first_answer(rank)) return false;
  out_.done.push_back(std::move(done));
  return due();
}

bool step_relay::on_error(int32_t rank, error err, std::vector<uint64_t> request_ids) {
  if (!first_answer(rank)) return false;
  collective_failed_ = collective_failed_ || err.code == errc::collective_failed;
  out_.rejected.push_back({out_.seq, rank, std::move(err), std::move(request_ids)});
  return due();
}

bool step_relay::on_silent(int32_t rank) {
  if (!first_answer(rank)) return false;
  out_.silent.push_back(rank);
  return due();
}

bool step_relay::silence_the_rest() {
  bool due_now = false;
  for (const int32_t rank : ranks_)
    due_now = on_silent(rank) || due_now;
  return due_now;
}

node_step_done step_relay::take() {
  taken_ = true;
  return std::move(out_);
}

} // namespace kvactor
