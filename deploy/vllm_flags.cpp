#include "deploy/vllm_flags.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "messages/cudagraph.hpp"

namespace kvactor {

namespace {

using flags_json = nlohmann::json;

status bad(std::string message) {
  return make_error(errc::invalid_argument, std::move(message));
}

// "cudagraph_mode" of the compilation config into f, unless --cudagraph-mode said otherwise.
status apply_mode(const flags_json& mode, const vllm_flags& v, plan_flags& f) {
  if (!mode.is_string())
    return bad(fmt::format("--compilation-config: cudagraph_mode: {} is not a string (e.g. "
                           "\"FULL_AND_PIECEWISE\")",
                           mode.dump()));
  const auto name = mode.get<std::string>();
  auto parsed = parse_cudagraph_mode(name);
  if (!parsed)
    return bad(fmt::format("--compilation-config: cudagraph_mode: unknown value '{}' (expected "
                           "NONE, PIECEWISE, FULL, FULL_DECODE_ONLY or FULL_AND_PIECEWISE)",
                           name));
  const std::string ours{to_string(*parsed)};
  const auto given = parse_cudagraph_mode(f.cudagraph_mode);
  if (v.cudagraph_mode_given && given && *given != *parsed)
    return bad(fmt::format("--compilation-config: cudagraph_mode '{}' disagrees with "
                           "--cudagraph-mode {}",
                           name, f.cudagraph_mode));
  f.cudagraph_mode = ours;
  return ok();
}

// "cudagraph_capture_sizes" of the compilation config into f, as --cudagraph-capture-sizes text.
status apply_sizes(const flags_json& sizes, const vllm_flags& v, plan_flags& f) {
  std::string text;
  if (!sizes.is_array())
    return bad(fmt::format("--compilation-config: cudagraph_capture_sizes: {} is not a list of "
                           "integers",
                           sizes.dump()));
  for (const auto& s : sizes) {
    if (!s.is_number_integer())
      return bad(fmt::format("--compilation-config: cudagraph_capture_sizes: {} is not an "
                             "integer",
                             s.dump()));
    text += (text.empty() ? "" : ",") + std::to_string(s.get<int64_t>());
  }
  if (v.cudagraph_capture_sizes_given && f.cudagraph_capture_sizes_text != text)
    return bad(fmt::format("--compilation-config: cudagraph_capture_sizes {} disagrees with "
                           "--cudagraph-capture-sizes {}",
                           sizes.dump(), f.cudagraph_capture_sizes_text));
  f.cudagraph_capture_sizes_text = text;
  return ok();
}

// The compilation config's keys into f; the keys kvactor has no use for are returned, and
// *sets_mode says whether it had a cudagraph_mode.
expected<std::vector<std::string>> apply_compilation_config(const vllm_flags& v, plan_flags& f,
                                                            bool* sets_mode) {
  std::vector<std::string> ignored;
  if (v.compilation_config.empty()) return ignored;
  const flags_json config = flags_json::parse(v.compilation_config, nullptr, false);
  if (config.is_discarded())
    return make_error(errc::invalid_argument,
                      fmt::format("--compilation-config: '{}' is not JSON", v.compilation_config));
  if (!config.is_object())
    return make_error(errc::invalid_argument,
                      fmt::format("--compilation-config: {} is not a JSON object", config.dump()));
  for (const auto& [key, value] : config.items()) {
    status st = ok();
    if (key == "cudagraph_mode") {
      st = apply_mode(value, v, f);
      *sets_mode = true;
    } else if (key == "cudagraph_capture_sizes") {
      st = apply_sizes(value, v, f);
    } else {
      ignored.push_back(key);
    }
    if (!st) return st.err();
  }
  return ignored;
}

} // namespace

std::vector<std::string> spell_vllm_short_flags(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-tp")
      args.push_back("--tensor-parallel-size");
    else if (a.starts_with("-tp="))
      args.push_back("--tensor-parallel-size=" + a.substr(4));
    else
      args.push_back(a);
  }
  return args;
}

expected<std::vector<std::string>> apply_vllm_flags(const vllm_flags& v, plan_flags& f) {
  bool config_sets_mode = false;
  auto ignored = apply_compilation_config(v, f, &config_sets_mode);
  if (!ignored) return ignored;
  if (v.enforce_eager) {
    const auto mode = parse_cudagraph_mode(f.cudagraph_mode);
    const bool graphs = mode && *mode != cudagraph_mode::none;
    if (graphs && (v.cudagraph_mode_given || config_sets_mode))
      return make_error(errc::invalid_argument,
                        fmt::format("--enforce-eager: runs without CUDA graphs, but graph mode "
                                    "'{}' was asked for too",
                                    f.cudagraph_mode));
    f.cudagraph_mode = std::string{to_string(cudagraph_mode::none)};
  }
  return ignored;
}

} // namespace kvactor
