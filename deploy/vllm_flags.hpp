// vLLM's spellings of kvactor's flags, so that a vLLM user's command line works: -tp N,
// --kv-cache-memory-bytes, --enforce-eager and --compilation-config '{...}'.
#pragma once

#include <string>
#include <vector>

#include "deploy/plan_command.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// argv with vLLM's "-tp N" / "-tp=N" spelled "--tensor-parallel-size" (CLI11 takes one-letter
/// short flags only); every other argument as it is.
std::vector<std::string> spell_vllm_short_flags(int argc, const char* const* argv);

/// The vLLM flags that set kvactor's, as parsed.
struct vllm_flags {
  bool enforce_eager = false;     // --enforce-eager: no CUDA graphs
  std::string compilation_config; // --compilation-config JSON
  bool cudagraph_mode_given = false;
  bool cudagraph_capture_sizes_given = false;
};

/// Applies them to `f` (its --cudagraph-mode and --cudagraph-capture-sizes). The compilation
/// config's "cudagraph_mode" (vLLM's names, e.g. "FULL_AND_PIECEWISE") and
/// "cudagraph_capture_sizes" (integers) are used; its other keys are returned, for a warning
/// (they are vLLM's and mean nothing here). Errors name the flag, the key and the value: JSON
/// that does not parse or is not an object, a value of the wrong type, a mode kvactor does not
/// know, or two flags that ask for different things (--enforce-eager with a graph mode).
expected<std::vector<std::string>> apply_vllm_flags(const vllm_flags& v, plan_flags& f);

} // namespace kvactor
