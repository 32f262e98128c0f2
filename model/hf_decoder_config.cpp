// config.json -> the CPU decoder's spec, per family.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/config_reader.hpp"
#include "model/families.hpp"
#include "model/hf_decoder.hpp"

namespace kvactor {

namespace {

using model_detail::config_reader;
using nlohmann::json;

const std::set<std::string> dense_families = {"llama",  "mistral",     "qwen2", "qwen3",
                                              "gemma2", "gemma3_text", "phi3"};

bool is_gemma(const std::string& t) {
  return t == "gemma2" || t == "gemma3_text";
}

error invalid(const std::string& t, const std::string& field, const std::string& what) {
  return make_error(errc::invalid_argument, fmt::format("{}: {} (model_type {})", field, what, t));
}

// A field that is a wrong type for its reader: read_decoder_config turns it into an error.
struct wrong_type : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A boolean field, or `fallback` when absent or null (json::value would throw a type error that
// does not name the field).
bool flag_or(const json& obj, const std::string& key, bool fallback) {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  if (!obj[key].is_boolean())
    throw wrong_type(fmt::format("{}: {} is not a boolean", key, obj[key].dump()));
  return obj[key].get<bool>();
}

expected<double> number_or(const json& obj, const std::string& key, double fallback,
                           const std::string& t) {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  if (!obj[key].is_number())
    return invalid(t, key, fmt::format("{} is not a number", obj[key].dump()));
  return obj[key].get<double>();
}

// A number that must be finite and above zero (a RoPE base, a norm's epsilon, a scaling factor).
expected<double> positive_number_or(const json& obj, const std::string& key, double fallback,
                                    const std::string& t) {
  auto v = number_or(obj, key, fallback, t);
  if (!v) return v;
  if (!std::isfinite(*v) || *v <= 0)
    return invalid(t, key, fmt::format("{} is not a finite number > 0", *v));
  return v;
}

// One RoPE parameter set: transformers 5's rope_parameters entry, or the Hub's rope_scaling with
// the base passed in. Types: default, linear, llama3; others are refused by name.
expected<kernels::rope_spec> read_rope(const json& p, double theta, const std::string& t) {
  kernels::rope_spec r;
  auto base = positive_number_or(p, "rope_theta", theta, t);
  if (!base) return base.err();
  r.theta = *base;
  const std::string type =
      p.contains("rope_type") && p["rope_type"].is_string() ? p["rope_type"].get<std::string>()
      : p.contains("type") && p["type"].is_string()         ? p["type"].get<std::string>()
                                                            : "default";
  auto partial = number_or(p, "partial_rotary_factor", 1.0, t);
  if (!partial) return partial.err();
  if (!(*partial > 0 && *partial <= 1))
    return invalid(t, "partial_rotary_factor", fmt::format("{} is outside (0, 1]", *partial));
  r.partial_rotary_factor = *partial;
  if (type == "default") return r;
  auto factor = positive_number_or(p, "factor", 1.0, t);
  if (!factor) return factor.err();
  if (type == "linear") {
    r.linear_factor = *factor;
    return r;
  }
  if (type != "llama3")
    return make_error(errc::unsupported,
                      fmt::format("rope_scaling (or rope_parameters): rope_type {}: kvactor "
                                  "runs default, linear and llama3 RoPE (model_type {})",
                                  type, t));
  r.llama3 = true;
  r.factor = *factor;
  for (auto [key, field] :
       {std::pair{"low_freq_factor", &r.low_freq_factor},
        {"high_freq_factor", &r.high_freq_factor},
        {"original_max_position_embeddings", &r.original_max_position_embeddings}}) {
    if (!p.contains(key)) return invalid(t, std::string("rope ") + key, "missing for llama3 RoPE");
    auto v = number_or(p, key, 0.0, t);
    if (!v) return v.err();
    *field = *v;
  }
  return r;
}

// The RoPE of full-attention and of sliding layers: rope_parameters (transformers 5, possibly
// one entry per layer type) or rope_theta / rope_scaling / rope_local_base_freq (the Hub).
expected<std::pair<kernels::rope_spec, kernels::rope_spec>> read_ropes(const json& c,
                                                                       const std::string& t) {
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object()) {
    const auto& p = c["rope_parameters"];
    if (p.contains("full_attention") && p["full_attention"].is_object()) {
      auto full = read_rope(p["full_attention"], 10000.0, t);
      if (!full) return full.err();
      auto local =
          p.contains("sliding_attention") ? read_rope(p["sliding_attention"], 10000.0, t) : full;
      if (!local) return local.err();
      return std::pair{*full, *local};
    }
    auto one = read_rope(p, 10000.0, t);
    if (!one) return one.err();
    return std::pair{*one, *one};
  }
  auto theta = positive_number_or(c, "rope_theta", 10000.0, t);
  if (!theta) return theta.err();
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null() && !c["rope_scaling"].is_object())
    return invalid(t, "rope_scaling",
                   fmt::format("{} is not an object", model_detail::short_dump(c["rope_scaling"])));
  json scaling = c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"]
                                                                             : json::object();
  if (c.contains("partial_rotary_factor"))
    scaling["partial_rotary_factor"] = c["partial_rotary_factor"];
  auto full = read_rope(scaling, *theta, t);
  if (!full) return full.err();
  auto local_theta = positive_number_or(c, "rope_local_base_freq", *theta, t);
  if (!local_theta) return local_theta.err();
  kernels::rope_spec local = *full;
  if (c.contains("rope_local_base_freq")) local = kernels::rope_spec{}, local.theta = *local_theta;
  return std::pair{*full, local};
}

// Which layers slide: layer_types when given, else the family's rule.
expected<std::vector<bool>> sliding_layers(const json& c, const config_reader& r, int64_t layers) {
  const auto& t = r.model_type();
  if (r.has("layer_types")) return model_detail::read_sliding_layer_types(r, layers);
  std::vector<bool> sliding(static_cast<size_t>(layers), false);
  const bool has_window = c.contains("sliding_window") && !c["sliding_window"].is_null();
  if (t == "gemma2") {
    for (int64_t i = 0; i < layers; ++i)
      sliding[static_cast<size_t>(i)] = i % 2 == 0;
  } else if (t == "gemma3_text") {
    auto pattern = r.positive_or("sliding_window_pattern", 6);
    if (!pattern) return pattern.err();
    for (int64_t i = 0; i < layers; ++i)
      sliding[static_cast<size_t>(i)] = (i + 1) % *pattern != 0;
  } else if (t == "mistral" || t == "phi3") {
    sliding.assign(static_cast<size_t>(layers), has_window);
  } else if ((t == "qwen2" || t == "qwen3") && flag_or(c, "use_sliding_window", false)) {
    return make_error(
        errc::unsupported,
        fmt::format("use_sliding_window: true without layer_types (model_type {})", t));
  }
  return sliding;
}

status refuse_unsupported_options(const json& c, const std::string& t) {
  if (t != "qwen2" && flag_or(c, "attention_bias", false))
    return make_error(errc::unsupported, fmt::format("attention_bias: true (model_type {}): "
                                                     "biased projections are qwen2's only",
                                                     t));
  if (flag_or(c, "mlp_bias", false))
    return make_error(errc::unsupported, fmt::format("mlp_bias: true (model_type {})", t));
  return ok();
}

expected<kernels::mlp_activation> read_activation(const json& c, const std::string& t) {
  const char* key = c.contains("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = c.contains(key) && c[key].is_string() ? c[key].get<std::string>()
                          : is_gemma(t)                         ? "gelu_pytorch_tanh"
                                                                : "silu";
  if (act == "silu" || act == "swish") return kernels::mlp_activation::silu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu_new")
    return kernels::mlp_activation::gelu_tanh;
  return invalid(t, key, fmt::format("{} (kvactor runs silu and gelu_pytorch_tanh)", act));
}

status read_gemma_quirks(const json& c, hf_decoder_config& out) {
  auto& s = out.spec;
  const auto& t = out.model_type;
  s.norm_one_plus_weight = true;
  s.sandwich_norms = true;
  s.qk_norm = t == "gemma3_text";
  s.embedding_scale = std::sqrt(static_cast<float>(s.hidden_size));
  auto scalar = number_or(c, "query_pre_attn_scalar", s.head_dim, t);
  if (!scalar) return scalar.err();
  if (!(*scalar > 0)) return invalid(t, "query_pre_attn_scalar", "must be > 0");
  s.attn_scale = static_cast<float>(1.0 / std::sqrt(*scalar));
  auto attn_cap = number_or(c, "attn_logit_softcapping", 0.0, t);
  auto final_cap = number_or(c, "final_logit_softcapping", 0.0, t);
  if (!attn_cap) return attn_cap.err();
  if (!final_cap) return final_cap.err();
  s.attn_softcap = static_cast<float>(*attn_cap);
  s.final_softcap = static_cast<float>(*final_cap);
  return ok();
}

// Totals, this rank's share of heads and MLP, the norms' epsilon.
status read_sizes(const config_reader& r, hf_decoder_config& out) {
  auto& s = out.spec;
  KVACTOR_MODEL_TRY(hidden, r.positive("hidden_size"));
  KVACTOR_MODEL_TRY(inter, r.positive("intermediate_size"));
  KVACTOR_MODEL_TRY(vocab, r.positive("vocab_size"));
  KVACTOR_MODEL_TRY(heads, r.positive("num_attention_heads"));
  KVACTOR_MODEL_TRY(kv_heads, r.positive_or("num_key_value_heads", heads));
  if (heads % kv_heads != 0)
    return r.invalid("num_key_value_heads",
                     fmt::format("{} does not divide num_attention_heads {} (grouped-query "
                                 "attention gives every KV head as many query heads)",
                                 kv_heads, heads));
  if (!r.has("head_dim") && hidden % heads != 0)
    return r.invalid("hidden_size", fmt::format("{} is not divisible by num_attention_heads {} "
                                                "(and there is no head_dim)",
                                                hidden, heads));
  KVACTOR_MODEL_TRY(head_dim,
                    r.positive_or("head_dim", hidden / heads, model_detail::max_head_dim));
  KVACTOR_MODEL_TRY(q_share, model_detail::split_evenly("num_attention_heads", heads, out.tp));
  KVACTOR_MODEL_TRY(kv_share,
                    model_detail::split_kv_heads("num_key_value_heads", kv_heads, out.tp));
  KVACTOR_MODEL_TRY(inter_share, model_detail::split_evenly("intermediate_size", inter, out.tp));
  s.hidden_size = static_cast<int32_t>(hidden);
  s.vocab_size = static_cast<int32_t>(vocab);
  s.head_dim = static_cast<int32_t>(head_dim);
  s.num_q_heads = static_cast<int32_t>(q_share);
  s.num_kv_heads = static_cast<int32_t>(kv_share);
  s.intermediate_size = static_cast<int32_t>(inter_share);
  out.total_q_heads = static_cast<int32_t>(heads);
  out.total_kv_heads = static_cast<int32_t>(kv_heads);
  out.total_intermediate = static_cast<int32_t>(inter);
  return ok();
}

status read_layers(const json& c, const config_reader& r, hf_decoder_config& out) {
  const auto& t = out.model_type;
  KVACTOR_MODEL_TRY(layers, model_detail::read_num_layers(r));
  KVACTOR_MODEL_TRY(ropes, read_ropes(c, t));
  KVACTOR_MODEL_TRY(sliding, sliding_layers(c, r, layers));
  KVACTOR_MODEL_TRY(window, model_detail::read_window_if_needed(r, sliding));
  for (int64_t i = 0; i < layers; ++i) {
    kernels::decoder_layer_spec l;
    const bool slides = sliding[static_cast<size_t>(i)];
    l.sliding_window = slides ? window : 0;
    l.rope = slides ? ropes.second : ropes.first;
    out.spec.layers.push_back(l);
  }
  return ok();
}

} // namespace

expected<std::vector<int32_t>> eos_token_ids_of(const json& c, std::string_view file) {
  std::vector<int32_t> out;
  if (!c.is_object() || !c.contains("eos_token_id") || c["eos_token_id"].is_null()) return out;
  const auto& e = c["eos_token_id"];
  auto bad = [&](const json& v) {
    return make_error(errc::invalid_argument,
                      fmt::format("{}: eos_token_id: {} is not a token id (an integer in [0, "
                                  "2147483647], or a list of them)",
                                  file, v.dump()));
  };
  const auto ids = e.is_array() ? e : json::array({e});
  for (const auto& x : ids) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0
        || x.get<int64_t>() > model_detail::int32_max)
      return bad(e);
    out.push_back(x.get<int32_t>());
  }
  return out;
}

expected<std::vector<int32_t>> model_eos_token_ids(const std::string& dir) {
  // generation_config.json is where the model's author says when generation stops: a damaged
  // one is an error, never a silent fall back to config.json.
  const std::string generation = dir + "/generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(generation, ec)) {
    auto j = read_config_json(generation);
    if (!j) return j.err();
    if (!j->is_object())
      return make_error(errc::parse_error,
                        fmt::format("{}: not a JSON object ({})", generation, j->type_name()));
    if (j->contains("eos_token_id")) return eos_token_ids_of(*j, generation);
  }
  auto config = read_config_json(dir + "/config.json");
  if (!config) return config.err();
  return eos_token_ids_of(*config, dir + "/config.json");
}

bool is_dense_decoder_family(const std::string& model_type) {
  return dense_families.count(model_type) > 0;
}

namespace {

// What running a planned but not dense family would still need, for its error.
std::string missing_for(const std::string& model_type) {
  static const std::map<std::string, std::string> missing{
      {"deepseek_v3", "no mixture-of-experts MLP (routed and shared experts) and no MLA "
                      "projections (the MLA attention kernel exists)"},
      {"deepseek_v2", "no mixture-of-experts MLP and no MLA projections"},
      {"gpt_oss", "no mixture-of-experts MLP (MXFP4 experts) and no attention sinks in the "
                  "decoder (the kernels have them)"},
      {"llama4", "no mixture-of-experts MLP and no chunked-attention layers in the decoder (the "
                 "kernels have chunked attention)"},
      {"llama4_text", "no mixture-of-experts MLP and no chunked-attention layers in the decoder"},
      {"qwen3_next", "no Gated DeltaNet linear-attention layers and no mixture-of-experts MLP"},
      {"qwen3_moe", "no mixture-of-experts MLP"},
      {"mixtral", "no mixture-of-experts MLP"},
      {"jamba", "no Mamba layers and no mixture-of-experts MLP"},
      {"gemma3", "this is the vision-language wrapper: its text decoder (text_config, "
                 "gemma3_text) would run, the vision tower does not"},
      {"bert", "no encoder (bidirectional attention, absolute positions, no LM head)"},
      {"whisper", "no encoder-decoder (audio encoder, cross-attention)"}};
  const auto it = missing.find(model_type);
  return it != missing.end() ? it->second : "no decoder for this architecture";
}

} // namespace

namespace {

expected<hf_decoder_config> read_checked_config(const json& c, int32_t tp, int32_t rank) {
  if (!c.is_object() || !c.contains("model_type") || !c["model_type"].is_string())
    return make_error(errc::missing_field, "model_type: missing from config.json");
  hf_decoder_config out;
  out.model_type = c["model_type"].get<std::string>();
  out.tp = tp;
  out.rank = rank;
  const auto& t = out.model_type;
  if (!is_dense_decoder_family(t))
    return make_error(errc::unsupported,
                      fmt::format("model_type {}: kvactor plans it but runs only the dense "
                                  "families (llama, mistral, qwen2, qwen3, gemma2, gemma3_text, "
                                  "phi3); its weights are not loaded: {}",
                                  t, missing_for(t)));
  if (auto refused = refuse_unsupported_options(c, t); !refused) return refused.err();
  config_reader r(c, "config", t);
  if (auto sized = read_sizes(r, out); !sized) return sized.err();
  if (auto layered = read_layers(c, r, out); !layered) return layered.err();
  auto eps = positive_number_or(c, "rms_norm_eps", 1e-6, t);
  if (!eps) return eps.err();
  out.spec.rms_eps = static_cast<float>(*eps);
  auto act = read_activation(c, t);
  if (!act) return act.err();
  out.spec.activation = *act;
  out.spec.qkv_bias = t == "qwen2";
  out.spec.qk_norm = t == "qwen3";
  if (is_gemma(t))
    if (auto quirks = read_gemma_quirks(c, out); !quirks) return quirks.err();
  out.layout = t == "phi3" ? projection_layout::fused : projection_layout::separate;
  // transformers' defaults where config.json leaves it out.
  out.tie_embeddings = flag_or(c, "tie_word_embeddings", is_gemma(t));
  KVACTOR_MODEL_TRY(eos, eos_token_ids_of(c, "config.json"));
  out.eos_token_ids = std::move(eos);
  return out;
}

} // namespace

expected<hf_decoder_config> read_decoder_config(const json& c, int32_t tp, int32_t rank) {
  // A field of the wrong type somewhere the readers above take a value as given is an error,
  // never an exception out of the loader (found by fuzzing config.json).
  try {
    return read_checked_config(c, tp, rank);
  } catch (const wrong_type& e) {
    return make_error(errc::invalid_argument, fmt::format("config.json: {}", e.what()));
  } catch (const json::exception& e) {
    return make_error(errc::invalid_argument, fmt::format("config.json: {}", e.what()));
  }
}

} // namespace kvactor
