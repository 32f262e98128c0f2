#include "deploy/tp_flags.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "kvactor/kernels/device_runtime.h"
#include "kvactor/kernels/nccl_communicator.h"

namespace kvactor {

namespace {

error bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// "RANK:N" with 0 <= RANK < tp and N >= 1.
expected<collective_stall> parse_stall(const std::string& text, int32_t tp) {
  auto invalid = [&] {
    return bad(fmt::format("--debug-stall: '{}' is not RANK:N (a rank in [0, {}) and a "
                           "collective number from 1)",
                           text, tp));
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) return invalid();
  try {
    size_t used_rank = 0, used_seq = 0;
    const auto rank_text = text.substr(0, colon), seq_text = text.substr(colon + 1);
    const long rank = std::stol(rank_text, &used_rank);
    const long long seq = std::stoll(seq_text, &used_seq);
    if (used_rank != rank_text.size() || used_seq != seq_text.size() || rank < 0 || rank >= tp
        || seq < 1)
      return invalid();
    return collective_stall{static_cast<int32_t>(rank), static_cast<uint64_t>(seq)};
  } catch (const std::exception&) {
    return invalid();
  }
}

} // namespace

expected<std::chrono::milliseconds> parse_collective_timeout(double s) {
  if (!std::isfinite(s) || s <= 0 || s > 86400)
    return bad(fmt::format("--collective-timeout: {} is not a number of seconds in (0, 86400]", s));
  return std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(std::llround(s * 1000)));
}

expected<tp_setup> resolve_tp_flags(const tp_flags& flags, device_kind device, int32_t tp) {
  tp_setup out;
  const auto& c = flags.communicator;
  if (c != "auto" && c != "host" && c != "nccl")
    return bad(fmt::format("--communicator: unknown value '{}' (expected auto, host or nccl)", c));
  const bool gpu = device == device_kind::cuda;
  if (c == "nccl" && !gpu)
    return bad("--communicator nccl: NCCL joins GPU ranks; CPU ranks use the host communicator "
               "(--device cuda, or --communicator host)");
  if (c == "host" && gpu && tp > 1)
    return bad(fmt::format("--communicator host: {} GPU ranks all-reduce device memory; they need "
                           "nccl",
                           tp));
  out.nccl = c == "nccl" || (c == "auto" && gpu && tp > 1);
  if (out.nccl) {
    std::string why;
    if (!kernels::nccl_available(&why))
      return bad(fmt::format("--tensor-parallel-size {} on --device cuda: {}", tp, why));
    const int32_t gpus = kernels::gpu_count(&why);
    if (tp > gpus)
      return bad(fmt::format("--tensor-parallel-size: {} GPU ranks need {} GPUs, {} visible{}", tp,
                             tp, gpus, gpus == 0 ? " (" + why + ")" : ""));
  }
  auto timeout = parse_collective_timeout(flags.collective_timeout_s);
  if (!timeout) return timeout.err();
  out.collective_timeout = *timeout;
  if (!flags.debug_stall.empty()) {
    auto stall = parse_stall(flags.debug_stall, tp);
    if (!stall) return stall.err();
    out.stall = *stall;
  }
  return out;
}

} // namespace kvactor
