// Where model configs come from: a path, or a name looked up in the model search dirs.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "messages/suggest.hpp"
#include "model/loader.hpp"

namespace kvactor {

namespace {

namespace fs = std::filesystem;

/// Where the shipped configs are: beside the running executable (share/kvactor/models next to its
/// bin/, installed or in a build tree, which copies them there), else where `cmake --install`
/// was told to put them. "" when neither exists.
std::string shipped_models_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = (exe.parent_path() / KVACTOR_MODELS_RELATIVE).lexically_normal();
    if (fs::is_directory(beside, ec)) return beside.string();
  }
  if (fs::is_directory(KVACTOR_MODELS_INSTALLED, ec)) return KVACTOR_MODELS_INSTALLED;
  return {};
}

/// $KVACTOR_MODELS_PATH (colon-separated, empty entries skipped), then the shipped configs.
std::vector<std::string> search_dirs() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("KVACTOR_MODELS_PATH")) {
    std::string_view rest{env};
    while (!rest.empty()) {
      auto colon = rest.find(':');
      auto dir = rest.substr(0, colon);
      if (!dir.empty()) out.emplace_back(dir);
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    }
  }
  if (auto shipped = shipped_models_dir(); !shipped.empty()) out.push_back(std::move(shipped));
  return out;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

} // namespace

expected<std::string> resolve_model_path(std::string_view path_or_name) {
  std::string name{path_or_name};
  if (!name.empty() && is_file(name)) return name;
  std::error_code ec;
  if (!name.empty() && fs::is_directory(name, ec)) {
    if (is_file(fs::path{name} / "config.json")) return (fs::path{name} / "config.json").string();
    return make_error(errc::io_error,
                      fmt::format("model '{}': a directory without config.json (a Hugging Face "
                                  "model directory holds config.json and its safetensors)",
                                  name));
  }
  auto dirs = search_dirs();
  auto file = name.ends_with(".json") ? name : name + ".json";
  if (!name.empty()) {
    for (const auto& dir : dirs) {
      auto candidate = fs::path{dir} / file;
      if (is_file(candidate)) return candidate.string();
    }
  }
  const auto shipped = shipped_model_names();
  return make_error(errc::io_error,
                    fmt::format("model '{}': not a file, and no {} in {}{} (shipped models: {})",
                                name, file, fmt::join(dirs, ", "), did_you_mean(name, shipped),
                                fmt::join(shipped, ", ")));
}

std::optional<std::string> checkpoint_directory(std::string_view model) {
  std::error_code ec;
  const fs::path dir{model};
  if (model.empty() || !fs::is_directory(dir, ec) || !is_file(dir / "config.json"))
    return std::nullopt;
  if (is_file(dir / "model.safetensors") || is_file(dir / "model.safetensors.index.json"))
    return dir.string();
  return std::nullopt;
}

status check_weights_present(std::string_view model) {
  std::error_code ec;
  const fs::path dir{model};
  // A directory without config.json is resolve_model_path's error to report.
  if (model.empty() || !fs::is_directory(dir, ec) || !is_file(dir / "config.json")
      || checkpoint_directory(model))
    return ok();
  return make_error(errc::io_error,
                    fmt::format("model '{}': a model directory without weights (looked for {} and "
                                "{}); give --load-format synthetic to run it with weights "
                                "generated from --seed",
                                model, (dir / "model.safetensors").string(),
                                (dir / "model.safetensors.index.json").string()));
}

expected<std::string> model_config_path(std::string_view model) {
  if (auto dir = checkpoint_directory(model)) return (fs::path{*dir} / "config.json").string();
  return resolve_model_path(model);
}

std::vector<std::string> shipped_model_names() {
  std::vector<std::string> out;
  std::error_code ec;
  const std::string dir = shipped_models_dir();
  if (dir.empty()) return out;
  fs::directory_iterator it{dir, ec};
  if (ec) return out;
  // increment(ec) rather than a range-for, whose operator++ throws.
  for (; it != fs::directory_iterator{}; it.increment(ec)) {
    if (ec) break;
    std::error_code file_ec;
    if (it->path().extension() == ".json" && it->is_regular_file(file_ec))
      out.push_back(it->path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace kvactor
