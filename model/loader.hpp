// The model loader: turns a Hugging Face config.json into the attention layers one
// tensor-parallel rank holds (messages/layer.hpp). Pure C++, no CAF; never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/engine_config.hpp"
#include "messages/errc.hpp"
#include "messages/layer.hpp"

namespace kvactor {

/// The flags that change how a config is read (vLLM's spellings in comments).
struct load_options : parallel_settings, dtype_settings {};

/// Returns `path_or_name` itself when it names an existing file; its config.json when it is a
/// Hugging Face model directory; otherwise the first
/// <dir>/<name>.json (or <dir>/<name> when the name ends in .json) that exists, searching the
/// colon-separated dirs of $KVACTOR_MODELS_PATH, then the shipped configs (share/kvactor/models
/// beside the running executable's bin/, installed or in a build tree; else under the install
/// prefix).
/// Fails with errc::io_error listing the searched dirs and the shipped names.
expected<std::string> resolve_model_path(std::string_view path_or_name);

/// `model` when it is a Hugging Face model directory with weights (config.json and
/// model.safetensors or model.safetensors.index.json), else nullopt (a config alone, or a name).
std::optional<std::string> checkpoint_directory(std::string_view model);

/// A model directory (config.json inside) whose weights are missing: an error naming the files
/// looked for. Ok for a directory with weights, a config file or a shipped name: a config alone
/// runs with generated weights, a directory only when they are asked for (`synthetic`).
status check_weights_present(std::string_view model);

/// The config.json of `model`: a model directory's own, else resolve_model_path's.
expected<std::string> model_config_path(std::string_view model);

/// Stems of the shipped *.json configs, sorted; empty when none are found.
std::vector<std::string> shipped_model_names();

/// Parses config.json text into the layers of `rank` (0 <= rank < tensor_parallel_size).
/// Fails with parse_error (not JSON, not an object), unknown_model_type, missing_field,
/// invalid_argument (flag or field outside its domain) or invalid_split (heads or state
/// dims not divisible by the tensor-parallel size); messages name the field and the value.
expected<model_layout> load_model_layout(std::string_view json_text, const load_options& opt,
                                         int32_t rank);

/// Reads a config file (path or shipped name, see resolve_model_path) and returns one layout
/// per rank, index = rank (size = tensor_parallel_size). Fails as the two functions above.
expected<std::vector<model_layout>> load_model(std::string_view path_or_name,
                                               const load_options& opt);

/// The model_type values load_model_layout understands, sorted.
std::vector<std::string> supported_model_types();

} // namespace kvactor
