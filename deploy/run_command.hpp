// `kvactor run`: its flags and its entry point. Local mode spawns one rank actor per
// tensor-parallel rank and a driver; cluster mode (--nodes) places the ranks on node processes.
// Either feeds a synthetic workload (deterministic from --seed) and prints a summary.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "deploy/chaos_flags.hpp"
#include "deploy/plan_command.hpp"
#include "deploy/tp_flags.hpp"
#include "messages/request.hpp"

namespace kvactor {

struct run_flags {
  plan_flags plan;              // --model, --block-size, --kv-cache-memory, ... (json unused)
  std::string debug_step_times; // testing: append each step's timeline marks here (CSV)
  int32_t ubatches = 1;
  int32_t requests = 16;
  std::string prompt_len = "32:128";
  std::string output_len = "16:48";
  std::string arrival_rate = "inf";
  int32_t shared_prefix_len = 0;     // the first N tokens of every prompt are the same
  int32_t num_shared_prefixes = 1;   // ... or one of this many such prefixes
  bool enable_prefix_caching = true; // --enable-prefix-caching / --no-enable-prefix-caching
  uint64_t seed = 0;
  std::optional<int32_t> logprobs; // every request asks for its tokens' logprobs and N top ones
  std::string summary_json;
  std::string record;                      // trace file (kvactor run --record FILE)
  bool progress = true;                    // on a terminal
  double stats_interval_s = 10.0;          // vLLM's stats line at info level; 0: never
  std::optional<uint16_t> metrics_port;    // serve /metrics and /health (0: any free port)
  std::string metrics_host = "127.0.0.1";  // where --metrics-port listens
  std::optional<uint16_t> inject_port;     // listen for kvactor inject on 127.0.0.1 (0: any port)
  std::string max_message_bytes = "64MiB"; // the largest message a peer may send us
  tp_flags tp;                             // --communicator, --collective-timeout, --debug-stall
  std::string nodes; // cluster mode: "host:port,host:port" of kvactor node processes
  std::string tls_cert, tls_key, tls_ca; // cluster mode: mutual TLS with the nodes
  std::string restart_policy = "none";   // cluster mode: none | rebuild
  double restart_wait_s = 60.0;          // rebuild: how long the lost nodes may take to return
  std::string step_path = "channel";     // --nodes: channel | middleman
  int64_t step_spin_us = 0;              // --nodes: the step channel's reader polls this long
  bool no_kernels = false; // benchmarks: the step protocol alone (every sampled token is 0)
  std::string load_format = "auto"; // auto | synthetic (the whole decoder, generated weights)
  std::string cudagraph_capture = "startup";  // startup | lazy
  std::string cudagraph_memory_text = "1GiB"; // --cudagraph-memory as typed: all graphs' cap
  chaos_flags chaos; // --step-timeout, and --chaos, --chaos-kill, --chaos-stall for testing
};

/// The JSON object of --summary-json (schema kvactor.run/1).
/// `ready_s`: seconds from start to every rank ready (model, weights, KV cache, graphs);
/// `ready`: each rank's start-up phases, written as "ready_phases".
std::string summary_json(const run_summary& s, const std::string& device, int32_t tp,
                         int32_t ubatches, double ready_s = 0,
                         const std::vector<rank_ready>& ready = {});

/// `kvactor run`: checks the flags, serves the workload (locally, or on --nodes) and prints the
/// summary. Exit codes as cli.hpp says; one-line errors on `err`.
int run_command(const run_flags& flags, std::ostream& out, std::ostream& err);

} // namespace kvactor
