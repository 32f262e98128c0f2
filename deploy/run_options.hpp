// `kvactor run`'s flags, checked and converted before any actor, device or model is touched.
// Every error names the flag and the value at fault.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "deploy/chaos_flags.hpp"
#include "deploy/cluster.hpp"
#include "deploy/run_command.hpp"
#include "messages/cudagraph.hpp"
#include "messages/device.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// What a cluster run does when it loses a rank.
enum class restart_policy : uint8_t { none, rebuild };

/// How a cluster run's steps reach the nodes: a step channel of their own, or CAF's middleman.
enum class step_path : uint8_t { channel, middleman };

/// The graph settings as checked: the mode, sizes, lazy capture and memory cap.
struct run_options : graph_settings {
  std::string model;                      // the shipped name or path (default kvactor-tiny)
  std::optional<device_kind> device;      // nullopt: auto (the GPU when one serves)
  bool cluster = false;                   // --nodes
  std::pair<int32_t, int32_t> prompt_len; // [min, max] tokens
  std::pair<int32_t, int32_t> output_len;
  double arrival_rate = 0;              // requests per second; 0: all at once
  std::vector<int64_t> kv_cache_memory; // --kv-cache-memory; empty: measured or the CPU default
  restart_policy restart = restart_policy::none;
  std::chrono::milliseconds restart_wait{60'000};
  step_path steps = step_path::channel;
  std::chrono::microseconds step_spin{0}; // the step channel's reader polls before it blocks
  tls_files tls;
  transport_limits transport; // --max-message-bytes and the connection limits
  chaos_setup chaos;          // --step-timeout, --chaos, --chaos-kill, --chaos-stall
};

/// Checks every flag that needs no device and no model.
expected<run_options> check_run_flags(const run_flags& flags);

} // namespace kvactor
