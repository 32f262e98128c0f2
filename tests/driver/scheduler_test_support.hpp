// A fake model for scheduler tests: the token sampled after position p of request r is f(r, p),
// so a request's output is known in advance whatever batching or preemption happened.
#pragma once

#include <gtest/gtest.h>

#include "actors/driver/scheduler.hpp"

namespace kvactor::test {

inline int32_t fake_token(uint64_t request_id, int32_t position) {
  return static_cast<int32_t>(request_id * 1000 + static_cast<uint64_t>(position));
}

/// The step_done a rank would send for `plan`: one fake token per sampled request.
inline step_done fake_done(const step_plan& plan) {
  step_done d;
  d.seq = plan.seq;
  d.epoch = plan.epoch;
  for (const auto& s : plan.scheduled)
    if (s.sample)
      d.sampled.push_back(
          {s.request_id, fake_token(s.request_id, s.num_computed_tokens
                                                      + static_cast<int32_t>(s.token_ids.size()))});
  return d;
}

/// Schedules step `seq` (epoch 0), runs the fake model and applies the result.
inline step_plan run_step(scheduler& s, uint64_t seq) {
  auto plan = s.schedule(seq, 0);
  EXPECT_TRUE(plan) << plan.err().message;
  if (!plan) return {};
  auto applied = s.apply(fake_done(*plan));
  EXPECT_TRUE(applied) << applied.err().message;
  return *plan;
}

inline std::vector<uint64_t> ids_of(const step_plan& p) {
  std::vector<uint64_t> out;
  for (const auto& s : p.scheduled)
    out.push_back(s.request_id);
  return out;
}

inline int32_t num_scheduled_tokens(const step_plan& p) {
  int32_t n = 0;
  for (const auto& s : p.scheduled)
    n += static_cast<int32_t>(s.token_ids.size());
  return n;
}

} // namespace kvactor::test
