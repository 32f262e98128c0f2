#include "actors/step_timeline.hpp"

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace kvactor {

std::string_view to_string(step_point p) {
  switch (p) {
  case step_point::driver_plan: return "driver_plan";
  case step_point::driver_send: return "driver_send";
  case step_point::driver_written: return "driver_written";
  case step_point::node_read: return "node_read";
  case step_point::node_relay: return "node_relay";
  case step_point::rank_received: return "rank_received";
  case step_point::rank_answered: return "rank_answered";
  case step_point::node_gathered: return "node_gathered";
  case step_point::node_written: return "node_written";
  case step_point::driver_read: return "driver_read";
  case step_point::driver_answer: return "driver_answer";
  case step_point::driver_step_done: return "driver_step_done";
  }
  return "unknown";
}

namespace step_timeline {
namespace {

struct step_mark {
  uint64_t seq;
  int32_t where;
  step_point point;
  int64_t ns;
};

struct timeline {
  std::atomic<bool> on{false};
  std::mutex mu;
  std::string label, path; // under mu
  std::vector<std::string> notes;
  std::vector<step_mark> marks;
};

// Made once and kept for the process's life: marks from any thread may race with exit.
std::atomic<timeline*> the_timeline{nullptr};

timeline& made_timeline() {
  if (timeline* t = the_timeline.load(std::memory_order_acquire)) return *t;
  auto t = std::make_unique<timeline>();
  t->marks.reserve(1 << 16);
  timeline* expected = nullptr;
  if (the_timeline.compare_exchange_strong(expected, t.get())) return *t.release();
  return *expected;
}

// The timeline when it is on, else nullptr.
timeline* live_timeline() {
  timeline* t = the_timeline.load(std::memory_order_acquire);
  return t && t->on.load(std::memory_order_relaxed) ? t : nullptr;
}

} // namespace

void enable(std::string label, std::string path) {
  timeline& t = made_timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  t.label = std::move(label);
  t.path = std::move(path);
  t.on = true;
}

void disable() {
  timeline* t = the_timeline.load(std::memory_order_acquire);
  if (!t) return;
  std::lock_guard<std::mutex> lock(t->mu);
  t->on = false;
  t->notes.clear();
  t->marks.clear();
}

bool enabled() {
  return live_timeline() != nullptr;
}

void mark(uint64_t seq, int32_t where, step_point p) {
  timeline* t = live_timeline();
  if (!t) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  std::lock_guard<std::mutex> lock(t->mu);
  if (t->on) t->marks.push_back({seq, where, p, ns}); // not after a disable() meanwhile
}

void note(std::string line) {
  timeline* t = live_timeline();
  if (!t) return;
  std::lock_guard<std::mutex> lock(t->mu);
  t->notes.push_back(std::move(line));
}

status flush() {
  timeline* t = live_timeline();
  if (!t) return ok();
  std::string label, path;
  std::vector<std::string> notes;
  std::vector<step_mark> marks;
  {
    std::lock_guard<std::mutex> lock(t->mu);
    label = t->label;
    path = t->path;
    notes.swap(t->notes);
    marks.swap(t->marks);
    t->marks.reserve(marks.capacity()); // no reallocation on the measured path next time
  }
  std::ofstream out(path, std::ios::app);
  for (const auto& n : notes)
    out << "# " << label << ' ' << n << '\n';
  for (const auto& m : marks)
    out << fmt::format("{},{},{},{},{}\n", label, m.seq, m.where, to_string(m.point), m.ns);
  out.flush();
  if (!out)
    return make_error(errc::io_error, fmt::format("--debug-step-times: cannot append to {}", path));
  return ok();
}

} // namespace step_timeline
} // namespace kvactor
