// The loader's entry points: flags, dtypes, the model_type -> family table, per-rank layouts.
#include "model/loader.hpp"

#include <algorithm>
#include <exception>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "model/families.hpp"

namespace kvactor {

namespace {

using model_detail::build_context;
using model_detail::config_reader;
using model_detail::family_builder;
using nlohmann::json;

struct family {
  std::string_view model_type;
  bool reads_text_config; // multimodal wrappers keep the language model under text_config
  family_builder build;
};

// Kept sorted by model_type, so that the unknown_model_type message lists them in order.
constexpr family families[] = {
    {"bert", false, model_detail::build_bert},
    {"deepseek_v2", false, model_detail::build_deepseek},
    {"deepseek_v3", false, model_detail::build_deepseek},
    {"gemma2", false, model_detail::build_gemma2},
    {"gemma3", true, model_detail::build_gemma3},
    {"gemma3_text", false, model_detail::build_gemma3},
    {"gemma3n", true, model_detail::build_gemma3n},
    {"gpt_oss", false, model_detail::build_gpt_oss},
    {"jamba", false, model_detail::build_jamba},
    {"llama", false, model_detail::build_llama_like},
    {"llama4", true, model_detail::build_llama4},
    {"longcat_flash", false, model_detail::build_longcat_flash},
    {"mistral", false, model_detail::build_llama_like},
    {"phi3", false, model_detail::build_llama_like},
    {"qwen2", false, model_detail::build_llama_like},
    {"qwen3", false, model_detail::build_llama_like},
    {"qwen3_next", false, model_detail::build_qwen3_next},
    {"whisper", false, model_detail::build_whisper},
};

const family* find_family(std::string_view model_type) {
  for (const auto& f : families)
    if (f.model_type == model_type) return &f;
  return nullptr;
}

/// The flags, checked and resolved against the config's declared dtype.
struct resolved_flags {
  dtype model_dtype = dtype::bfloat16;
  dtype kv_dtype = dtype::bfloat16;
};

status check_split_flags(const load_options& opt, std::optional<int32_t> rank) {
  if (opt.tensor_parallel_size < 1)
    return make_error(
        errc::invalid_argument,
        fmt::format("--tensor-parallel-size: {} must be at least 1", opt.tensor_parallel_size));
  if (rank && (*rank < 0 || *rank >= opt.tensor_parallel_size))
    return make_error(errc::invalid_argument,
                      fmt::format("rank: {} is outside [0, {}) for --tensor-parallel-size {}",
                                  *rank, opt.tensor_parallel_size, opt.tensor_parallel_size));
  return ok();
}

bool is_model_dtype(dtype x) {
  return x == dtype::bfloat16 || x == dtype::float16 || x == dtype::float32;
}

/// The config's torch_dtype (or dtype, its newer name): top level first, then text_config.
/// Returns {field name, value}; nullopt when neither says.
expected<std::optional<std::pair<std::string, std::string>>> declared_dtype(const json& root) {
  std::vector<std::pair<const json*, std::string>> scopes{{&root, ""}};
  if (auto it = root.find("text_config"); it != root.end() && it->is_object())
    scopes.emplace_back(&*it, "text_config.");
  for (const auto& [obj, prefix] : scopes) {
    for (const char* key : {"torch_dtype", "dtype"}) {
      auto it = obj->find(key);
      if (it == obj->end() || it->is_null()) continue;
      auto field = prefix + key;
      if (!it->is_string())
        return make_error(errc::invalid_argument, fmt::format("{}: {} must be a string", field,
                                                              model_detail::short_dump(*it)));
      return std::optional{std::pair{field, it->get<std::string>()}};
    }
  }
  return std::optional<std::pair<std::string, std::string>>{};
}

expected<resolved_flags> resolve_dtypes(const load_options& opt, const json& root) {
  resolved_flags out;
  if (opt.dtype == "auto") {
    KVACTOR_MODEL_TRY(declared, declared_dtype(root));
    if (declared) {
      auto [field, value] = *declared;
      std::string_view name = value;
      if (name.starts_with("torch.")) name.remove_prefix(6);
      auto parsed = parse_dtype(name);
      if (!parsed || !is_model_dtype(*parsed))
        return make_error(errc::invalid_argument,
                          fmt::format("{}: unknown value '{}' (expected bfloat16, float16 or "
                                      "float32)",
                                      field, value));
      // vLLM serves float32 checkpoints in bfloat16 unless --dtype float32 asks otherwise.
      out.model_dtype = *parsed == dtype::float32 ? dtype::bfloat16 : *parsed;
    }
  } else {
    auto parsed = parse_dtype(opt.dtype);
    if (!parsed || !is_model_dtype(*parsed))
      return make_error(errc::invalid_argument,
                        fmt::format("--dtype: unknown value '{}' (expected auto, bfloat16, "
                                    "float16 or float32)",
                                    opt.dtype));
    out.model_dtype = *parsed;
  }
  if (opt.kv_cache_dtype == "auto") {
    out.kv_dtype = out.model_dtype;
  } else if (opt.kv_cache_dtype == "fp8" || opt.kv_cache_dtype == "fp8_e4m3") {
    out.kv_dtype = dtype::fp8_e4m3;
  } else {
    return make_error(errc::invalid_argument,
                      fmt::format("--kv-cache-dtype: unknown value '{}' (expected auto or fp8)",
                                  opt.kv_cache_dtype));
  }
  return out;
}

expected<std::string> read_model_type(const json& root) {
  auto it = root.find("model_type");
  if (it == root.end() || it->is_null())
    return make_error(errc::missing_field, "model_type: missing from config");
  if (!it->is_string())
    return make_error(errc::invalid_argument, fmt::format("model_type: {} must be a string",
                                                          model_detail::short_dump(*it)));
  return it->get<std::string>();
}

/// REQUIRES: root is an object and check_split_flags(opt, rank) passed.
expected<model_layout> build_layout(const json& root, const load_options& opt, int32_t rank) {
  KVACTOR_MODEL_TRY(model_type, read_model_type(root));
  const auto* fam = find_family(model_type);
  if (fam == nullptr) {
    std::string names;
    for (const auto& f : families)
      names += (names.empty() ? "" : ", ") + std::string{f.model_type};
    return make_error(
        errc::unknown_model_type,
        fmt::format("model_type: unknown value '{}' (supported: {})", model_type, names));
  }
  KVACTOR_MODEL_TRY(flags, resolve_dtypes(opt, root));
  const json* section = &root;
  std::string where = "config";
  if (fam->reads_text_config) {
    if (auto it = root.find("text_config"); it != root.end() && !it->is_null()) {
      if (!it->is_object())
        return make_error(errc::invalid_argument,
                          fmt::format("text_config: {} must be an object (model_type {})",
                                      model_detail::short_dump(*it), model_type));
      section = &*it;
      where = "text_config";
    }
  }
  config_reader cfg{*section, where, model_type};
  build_context ctx{cfg, opt.tensor_parallel_size, rank, flags.model_dtype, flags.kv_dtype};
  model_layout out;
  if (auto st = fam->build(ctx, out); !st) return st.err();
  out.model_type = model_type;
  out.rank = rank;
  out.tensor_parallel_size = opt.tensor_parallel_size;
  out.model_dtype = flags.model_dtype;
  // The synthetic attention stack's widths; encoder-decoder configs call the width d_model.
  for (const char* key : {"hidden_size", "d_model"})
    if (auto it = section->find(key); it != section->end() && it->is_number_integer()) {
      out.hidden_size = it->get<int32_t>();
      break;
    }
  if (auto it = section->find("vocab_size"); it != section->end() && it->is_number_integer())
    out.vocab_size = it->get<int32_t>();
  else if (auto top = root.find("vocab_size"); top != root.end() && top->is_number_integer())
    out.vocab_size = top->get<int32_t>();
  if (auto it = section->find("attn_logit_softcapping"); it != section->end() && it->is_number())
    for (auto& l : out.layers)
      l.logit_softcap = it->get<float>();
  return out;
}

expected<json> parse_config(std::string_view text) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) { // parse_error, and out_of_range for a number overflow
    return make_error(errc::parse_error, fmt::format("config: not valid JSON: {}", e.what()));
  }
  if (!root.is_object())
    return make_error(errc::parse_error, fmt::format("config: the top level is {}, expected an "
                                                     "object",
                                                     root.type_name()));
  return root;
}

error unexpected_exception(const std::exception& e) {
  // A safety net: the readers check types first, so this means a loader bug or no memory.
  return make_error(errc::parse_error, fmt::format("config: unexpected failure: {}", e.what()));
}

} // namespace

expected<model_layout> load_model_layout(std::string_view json_text, const load_options& opt,
                                         int32_t rank) {
  try {
    if (auto st = check_split_flags(opt, rank); !st) return st.err();
    KVACTOR_MODEL_TRY(root, parse_config(json_text));
    return build_layout(root, opt, rank);
  } catch (const std::exception& e) {
    return unexpected_exception(e);
  }
}

expected<std::vector<model_layout>> load_model(std::string_view path_or_name,
                                               const load_options& opt) {
  try {
    if (auto st = check_split_flags(opt, std::nullopt); !st) return st.err();
    KVACTOR_MODEL_TRY(path, resolve_model_path(path_or_name));
    std::ifstream in{path, std::ios::binary};
    if (!in) return make_error(errc::io_error, fmt::format("{}: cannot open the file", path));
    std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
    if (in.bad()) return make_error(errc::io_error, fmt::format("{}: cannot read the file", path));
    // Every error names the file, since the caller may have given only a model name.
    auto in_file = [&path](const error& e) {
      return make_error(e.code, fmt::format("{}: {}", path, e.message));
    };
    auto root = parse_config(text);
    if (!root) return in_file(root.err());
    std::vector<model_layout> out;
    out.reserve(static_cast<size_t>(opt.tensor_parallel_size));
    for (int32_t rank = 0; rank < opt.tensor_parallel_size; ++rank) {
      auto layout = build_layout(*root, opt, rank);
      if (!layout) return in_file(layout.err());
      out.push_back(std::move(*layout));
    }
    return out;
  } catch (const std::exception& e) {
    return unexpected_exception(e);
  }
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const auto& f : families)
    out.emplace_back(f.model_type);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace kvactor
