#include "deploy/chaos_flags.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace kvactor {

namespace {

error bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

template <class T>
bool parse_whole(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc{} && end == text.data() + text.size();
}

// "RANK:STEP": a rank in [0, tp) and a step sequence number (the first step is 0).
expected<step_fault> parse_step_fault(const char* flag, step_fault::kind what,
                                      const std::string& text, int32_t tp) {
  step_fault f;
  f.what = what;
  const auto colon = text.find(':');
  const std::string_view all{text};
  if (colon == std::string::npos || !parse_whole(all.substr(0, colon), f.rank)
      || !parse_whole(all.substr(colon + 1), f.seq) || f.rank < 0 || f.rank >= tp)
    return bad(fmt::format("{}: '{}' is not RANK:STEP (a rank in [0, {}) and a step number from 0)",
                           flag, text, tp));
  return f;
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
    return bad(fmt::format("--step-timeout: {} is not a number of seconds in [0, 86400] (0: no "
                           "limit)",
                           flags.step_timeout_s));
  out.deadlines.step_timeout = std::chrono::milliseconds(std::llround(flags.step_timeout_s * 1000));
  return out;
}

} // namespace kvactor
