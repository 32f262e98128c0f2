#include "deploy/tp_flags.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "kvactor/comm/device_local_communicator.h"
#include "kvactor/comm/nccl_communicator.h"
#include "kvactor/kernels/device_runtime.h"

namespace kvactor {

namespace {

error bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// "0,0,1": one CUDA ordinal per rank, each in [0, 1024).
expected<std::vector<int32_t>> parse_gpu_ids(const std::string& text, int32_t tp) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    const auto item = text.substr(start, end - start);
    size_t used = 0;
    long id = -1;
    try {
      id = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || id < 0 || id >= 1024)
      return bad(fmt::format("--gpu-ids: '{}' in '{}' is not a CUDA device ordinal", item, text));
    ids.push_back(static_cast<int32_t>(id));
    start = end + 1;
  }
  if (std::ssize(ids) != tp)
    return bad(fmt::format("--gpu-ids: '{}' names {} GPU(s) for {} rank(s) (one per rank)", text,
                           ids.size(), tp));
  return ids;
}

// The GPUs each rank uses and whether they share one: --gpu-ids, or rank r on GPU r (on GPU 0
// for every rank with --communicator device).
expected<tp_setup> place_gpu_ranks(const tp_flags& flags, int32_t tp) {
  tp_setup out;
  if (!flags.gpu_ids.empty()) {
    auto ids = parse_gpu_ids(flags.gpu_ids, tp);
    if (!ids) return ids.err();
    out.gpus = std::move(*ids);
  } else if (flags.communicator == "device") {
    out.gpus.assign(static_cast<size_t>(tp), 0);
  }
  const std::set<int32_t> distinct(out.gpus.begin(), out.gpus.end());
  const bool shared = tp > 1 && distinct.size() == 1;
  if (tp > 1 && !out.gpus.empty() && !shared && std::ssize(distinct) != tp)
    return bad(fmt::format("--gpu-ids: '{}' shares some GPUs and not others; ranks either all "
                           "share one GPU (the device-local communicator) or each have their own "
                           "(NCCL)",
                           flags.gpu_ids));
  if (flags.communicator == "nccl" && shared)
    return bad(fmt::format("--communicator nccl: NCCL refuses two ranks on one GPU (--gpu-ids "
                           "'{}'); ranks sharing a GPU meet through --communicator device",
                           flags.gpu_ids));
  if (flags.communicator == "device" && tp > 1 && !shared)
    return bad(fmt::format("--communicator device: the device-local communicator joins ranks "
                           "that share one GPU; --gpu-ids '{}' gives them different ones",
                           flags.gpu_ids));
  const auto& c = flags.communicator;
  out.device_local = shared || c == "device";
  out.nccl = c == "nccl" || (c == "auto" && tp > 1 && !shared);
  return out;
}

// Every GPU a rank uses is visible (rank r on GPU r when the ids are not given).
status check_visible(const tp_setup& s, int32_t tp) {
  std::string why;
  const int32_t gpus = kernels::gpu_count(&why);
  const int32_t highest = s.gpus.empty() ? tp - 1 : *std::max_element(s.gpus.begin(), s.gpus.end());
  const auto needed = s.gpus.empty() ? static_cast<size_t>(tp)
                                     : std::set<int32_t>(s.gpus.begin(), s.gpus.end()).size();
  if (highest < gpus) return ok();
  if (s.gpus.empty() || s.nccl)
    return bad(fmt::format("--tensor-parallel-size: {} GPU ranks need {} GPUs, {} visible{}", tp,
                           needed, gpus, gpus == 0 ? " (" + why + ")" : ""));
  return bad(fmt::format("--gpu-ids: GPU {} is not visible ({} visible{})", highest, gpus,
                         gpus == 0 ? ": " + why : ""));
}

// The fault injections of the flags (only their stall and fail_capture are set).
expected<tp_setup> parse_faults(const tp_flags& flags, device_kind device, int32_t tp) {
  tp_setup out;
  if (!flags.debug_stall.empty()) {
    auto stall = parse_rank_fault("--debug-stall", "collective", flags.debug_stall, tp);
    if (!stall) return stall.err();
    out.stall = collective_stall{stall->first, stall->second};
  }
  if (!flags.debug_fail_capture.empty()) {
    if (device != device_kind::cuda)
      return bad("--debug-fail-capture: only GPU ranks capture CUDA graphs (--device cuda)");
    auto fault = parse_rank_fault("--debug-fail-capture", "capture", flags.debug_fail_capture, tp);
    if (!fault) return fault.err();
    out.fail_capture = capture_failure{fault->first, fault->second};
  }
  return out;
}

} // namespace

expected<std::pair<int32_t, uint64_t>> parse_rank_fault(const char* flag, const char* what,
                                                        const std::string& text, int32_t tp,
                                                        uint64_t first) {
  auto invalid = [&] {
    return bad(fmt::format("{}: '{}' is not RANK:N (a rank in [0, {}) and a {} number from {})",
                           flag, text, tp, what, first));
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) return invalid();
  try {
    size_t used_rank = 0, used_seq = 0;
    const auto rank_text = text.substr(0, colon), seq_text = text.substr(colon + 1);
    const long rank = std::stol(rank_text, &used_rank);
    const long long seq = std::stoll(seq_text, &used_seq);
    if (used_rank != rank_text.size() || used_seq != seq_text.size() || rank < 0 || rank >= tp
        || seq < static_cast<long long>(first))
      return invalid();
    return std::pair{static_cast<int32_t>(rank), static_cast<uint64_t>(seq)};
  } catch (const std::exception&) {
    return invalid();
  }
}

expected<std::chrono::milliseconds> parse_collective_timeout(double s) {
  if (!std::isfinite(s) || s <= 0 || s > 86400)
    return bad(fmt::format("--collective-timeout: {} is not a number of seconds in (0, 86400]", s));
  return std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(std::llround(s * 1000)));
}

expected<tp_setup> resolve_tp_flags(const tp_flags& flags, device_kind device, int32_t tp) {
  tp_setup out;
  const auto& c = flags.communicator;
  if (c != "auto" && c != "host" && c != "nccl" && c != "device")
    return bad(
        fmt::format("--communicator: unknown value '{}' (expected auto, host, nccl or device)", c));
  const bool gpu = device == device_kind::cuda;
  if ((c == "nccl" || c == "device") && !gpu)
    return bad(fmt::format("--communicator {}: {} joins GPU ranks; CPU ranks use the host "
                           "communicator (--device cuda, or --communicator host)",
                           c, c == "nccl" ? "NCCL" : "the device-local communicator"));
  if (!gpu && !flags.gpu_ids.empty())
    return bad(fmt::format("--gpu-ids: '{}' places GPU ranks; this run's ranks are CPU ranks "
                           "(--device cuda)",
                           flags.gpu_ids));
  if (c == "host" && gpu && tp > 1)
    return bad(fmt::format("--communicator host: {} GPU ranks all-reduce device memory; they need "
                           "nccl, or device when they share a GPU",
                           tp));
  auto faults = parse_faults(flags, device, tp); // before placement: no GPU needed to check them
  if (!faults) return faults.err();
  if (gpu) {
    auto placed = place_gpu_ranks(flags, tp);
    if (!placed) return placed.err();
    out = std::move(*placed);
  }
  std::string why;
  if (out.nccl && !comm::nccl_available(&why))
    return bad(fmt::format("--tensor-parallel-size {} on --device cuda: {}", tp, why));
  if (out.device_local && tp > comm::max_device_local_ranks)
    return bad(fmt::format("--gpu-ids: {} ranks on one GPU; the device-local communicator joins "
                           "at most {}",
                           tp, comm::max_device_local_ranks));
  if (gpu && (out.nccl || !out.gpus.empty()))
    if (auto visible = check_visible(out, tp); !visible) return visible.err();
  auto timeout = parse_collective_timeout(flags.collective_timeout_s);
  if (!timeout) return timeout.err();
  out.collective_timeout = *timeout;
  out.stall = faults->stall;
  out.fail_capture = faults->fail_capture;
  return out;
}

} // namespace kvactor
