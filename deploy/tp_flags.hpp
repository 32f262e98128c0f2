// `kvactor run`'s tensor-parallel flags: which communicator joins the ranks, how long a collective
// may wait, and the --debug-stall and --debug-fail-capture fault injections, checked against the
// device and the TP size.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/rank/group.hpp"
#include "messages/device.hpp"
#include "messages/errc.hpp"

namespace kvactor {

struct tp_flags {
  std::string communicator = "auto"; // auto | host | nccl | device
  double collective_timeout_s = 120.0;
  std::string debug_stall;        // "RANK:N", empty: none
  std::string debug_fail_capture; // "RANK:N", empty: none
  std::string gpu_ids;            // "0,0,0,0": each GPU rank's CUDA ordinal; empty: rank r on GPU r
};

/// How the ranks of a run meet.
struct tp_setup {
  bool nccl = false;
  bool device_local = false; // GPU ranks sharing one GPU (the device-local communicator)
  std::vector<int32_t> gpus; // [ranks] each rank's CUDA ordinal; empty: rank r on GPU r
  std::chrono::milliseconds collective_timeout{120'000};
  std::optional<collective_stall> stall;
  std::optional<capture_failure> fail_capture;
};

/// "RANK:N" of a fault injection `flag`: a rank in [0, tp) and a `what` number from `first`; the
/// error names the flag, the text and both ranges.
expected<std::pair<int32_t, uint64_t>> parse_rank_fault(const char* flag, const char* what,
                                                        const std::string& text, int32_t tp,
                                                        uint64_t first = 1);

/// --collective-timeout in seconds: in (0, 86400], else an error naming the flag.
expected<std::chrono::milliseconds> parse_collective_timeout(double seconds);

/// Resolves the flags for `tp` ranks on `device`. auto: for several GPU ranks, NCCL when each has
/// a GPU of its own and the device-local communicator when --gpu-ids puts them all on one; the
/// host communicator otherwise. Errors name the flag and the value: host memory for GPU ranks,
/// NCCL for CPU ranks or for ranks sharing a GPU, NCCL missing from this build, more GPU ranks
/// than visible GPUs, GPU ids that are not one per rank, out of range or only partly shared, a
/// timeout that is not a positive number of seconds, a fault outside the ranks.
expected<tp_setup> resolve_tp_flags(const tp_flags& flags, device_kind device, int32_t tp);

} // namespace kvactor
