#include "deploy/chaos_flags.hpp"

#include <cmath>

#include <fmt/format.h>

#include "deploy/tp_flags.hpp"

namespace kvactor {

namespace {

error chaos_flag_error(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// "RANK:STEP": a rank in [0, tp) and a step sequence number (the first step is 0).
expected<step_fault> parse_step_fault(const char* flag, step_fault::kind what,
                                      const std::string& text, int32_t tp) {
  auto parsed = parse_rank_fault(flag, "step", text, tp, 0);
  if (!parsed) return parsed.err();
  return step_fault{what, parsed->first, parsed->second};
}

} // namespace

expected<chaos_setup> resolve_chaos_flags(const chaos_flags& flags, int32_t tp) {
  chaos_setup out;
  if (!flags.chaos.empty()) {
    auto spec = parse_chaos_spec(flags.chaos);
    if (!spec) return spec.err();
    out.chaos = *spec;
    out.deadlines.retransmit = true;
  }
  if (!flags.kill.empty()) {
    auto f = parse_step_fault("--chaos-kill", step_fault::kind::kill, flags.kill, tp);
    if (!f) return f.err();
    out.faults.push_back(*f);
  }
  if (!flags.stall.empty()) {
    auto f = parse_step_fault("--chaos-stall", step_fault::kind::stall, flags.stall, tp);
    if (!f) return f.err();
    out.faults.push_back(*f);
  }
  if (!std::isfinite(flags.step_timeout_s) || flags.step_timeout_s < 0
      || flags.step_timeout_s > 86400)
    return chaos_flag_error(
        fmt::format("--step-timeout: {} is not a number of seconds in [0, 86400] (0: no "
                    "limit)",
                    flags.step_timeout_s));
  out.deadlines.step_timeout = std::chrono::milliseconds(std::llround(flags.step_timeout_s * 1000));
  return out;
}

} // namespace kvactor
