#include "kvactor/comm/collective_ledger.h"

#include <algorithm>

namespace kvactor::comm {

std::string_view to_string(collective_status x) {
  switch (x) {
  case collective_status::pending: return "pending";
  case collective_status::completed: return "completed";
  case collective_status::timed_out: return "timed_out";
  case collective_status::aborted: return "aborted";
  case collective_status::failed: return "failed";
  }
  return "unknown";
}

std::string operation_name(const collective_record& r) {
  std::string out{to_string(r.kind)};
  if (r.kind == collective_kind::all_reduce) {
    out += '(';
    out += to_string(r.op);
    out += ')';
  } else if (r.kind == collective_kind::broadcast) {
    out += "(root ";
    out += std::to_string(r.root);
    out += ')';
  }
  return out;
}

std::string describe(const collective_record& r) {
  std::string out = operation_name(r);
  out += " #";
  out += std::to_string(r.seq);
  out += " (";
  if (r.kind != collective_kind::barrier) {
    out += std::to_string(r.count);
    out += ' ';
    out += to_string(r.dtype);
    out += ", ";
    out += std::to_string(r.bytes);
    out += " bytes, ";
  }
  out += to_string(r.status);
  out += ')';
  return out;
}

collective_record make_record(collective_kind kind, reduce_op op, collective_dtype dtype,
                              size_t count, int root, uint64_t seq) {
  collective_record r;
  r.seq = seq;
  r.kind = kind;
  r.op = op;
  r.dtype = dtype;
  r.count = count;
  r.bytes = count * size_of(dtype);
  r.root = root;
  return r;
}

collective_ledger::collective_ledger(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

uint64_t collective_ledger::enter(collective_kind kind, reduce_op op, collective_dtype dtype,
                                  size_t count, int root) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto r = make_record(kind, op, dtype, count, root, next_++);
  records_.push_back(r);
  if (records_.size() > capacity_) records_.pop_front();
  return r.seq;
}

void collective_ledger::finish(uint64_t seq, collective_status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (records_.empty() || seq < records_.front().seq || seq > records_.back().seq) return;
  records_[static_cast<size_t>(seq - records_.front().seq)].status = status;
}

void collective_ledger::finish_pending(collective_status status) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : records_)
    if (r.status == collective_status::pending) r.status = status;
}

std::vector<collective_record> collective_ledger::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {records_.begin(), records_.end()};
}

std::vector<collective_record> collective_ledger::last(size_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t k = std::min(n, records_.size());
  return {records_.end() - static_cast<std::ptrdiff_t>(k), records_.end()};
}

uint64_t collective_ledger::next_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

std::string collective_ledger::tail(size_t n) const {
  auto xs = last(n);
  if (xs.empty()) return "no collective entered yet";
  std::string out = "this rank's last collectives: ";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0) out += "; ";
    out += describe(xs[i]);
  }
  return out;
}

} // namespace kvactor::comm
