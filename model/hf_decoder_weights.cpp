// The checkpoint's tensors -> this rank's decoder weights: every expected tensor checked first
// (one error lists every problem), then sliced for the rank and converted to float.
#include <cmath>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kvactor/kernels/sampler.h"
#include "model/hf_decoder.hpp"

namespace kvactor {

namespace {

using shape = std::vector<int64_t>;

std::string show(const shape& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

} // namespace

// The tensors a family needs, with their global shapes.
std::vector<std::pair<std::string, shape>> checkpoint_tensors(const hf_decoder_config& c) {
  const auto& s = c.spec;
  const int64_t hid = s.hidden_size, d = s.head_dim, inter = c.total_intermediate;
  const int64_t qw = c.total_q_heads * d, kw = c.total_kv_heads * d;
  std::vector<std::pair<std::string, shape>> out{{"model.embed_tokens.weight", {s.vocab_size, hid}},
                                                 {"model.norm.weight", {hid}}};
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {s.vocab_size, hid}});
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const auto p = fmt::format("model.layers.{}.", l);
    auto add = [&](const std::string& n, shape sh) { out.push_back({p + n, std::move(sh)}); };
    add("input_layernorm.weight", {hid});
    add("post_attention_layernorm.weight", {hid});
    if (s.sandwich_norms) {
      add("pre_feedforward_layernorm.weight", {hid});
      add("post_feedforward_layernorm.weight", {hid});
    }
    if (c.layout == projection_layout::fused) {
      add("self_attn.qkv_proj.weight", {qw + 2 * kw, hid});
      add("mlp.gate_up_proj.weight", {2 * inter, hid});
    } else {
      add("self_attn.q_proj.weight", {qw, hid});
      add("self_attn.k_proj.weight", {kw, hid});
      add("self_attn.v_proj.weight", {kw, hid});
      add("mlp.gate_proj.weight", {inter, hid});
      add("mlp.up_proj.weight", {inter, hid});
    }
    if (s.qkv_bias) {
      add("self_attn.q_proj.bias", {qw});
      add("self_attn.k_proj.bias", {kw});
      add("self_attn.v_proj.bias", {kw});
    }
    if (s.qk_norm) {
      add("self_attn.q_norm.weight", {d});
      add("self_attn.k_norm.weight", {d});
    }
    add("self_attn.o_proj.weight", {hid, qw});
    add("mlp.down_proj.weight", {hid, inter});
  }
  return out;
}

rank_slices rank_slices_of(const hf_decoder_config& c) {
  const auto& s = c.spec;
  const int64_t d = s.head_dim;
  // KV heads split when there are at least as many as ranks, else each is replicated on
  // tp / total_kv ranks (vLLM's rule).
  const int64_t kv_head = c.total_kv_heads >= c.tp ? static_cast<int64_t>(c.rank) * s.num_kv_heads
                                                   : c.rank / (c.tp / c.total_kv_heads);
  return {c.rank * s.num_q_heads * d,
          s.num_q_heads * d,
          kv_head * d,
          static_cast<int64_t>(s.num_kv_heads) * d,
          static_cast<int64_t>(c.rank) * s.intermediate_size,
          s.intermediate_size};
}

namespace {

// Tensors a checkpoint may carry that kvactor does not read.
bool ignorable(const std::string& name, const hf_decoder_config& c) {
  return name.ends_with("rotary_emb.inv_freq") || (c.tie_embeddings && name == "lm_head.weight");
}

} // namespace

status check_checkpoint_tensors(const checkpoint& ckpt, const hf_decoder_config& c) {
  std::vector<std::string> problems;
  std::set<std::string> wanted;
  for (const auto& [name, sh] : checkpoint_tensors(c)) {
    wanted.insert(name);
    const auto* t = ckpt.find(name);
    if (!t)
      problems.push_back(fmt::format("missing {} (expected {})", name, show(sh)));
    else if (t->shape != sh)
      problems.push_back(
          fmt::format("{} has shape {}, expected {}", name, show(t->shape), show(sh)));
  }
  for (const auto& [name, t] : ckpt.tensors())
    if (!wanted.count(name) && !ignorable(name, c))
      problems.push_back(fmt::format("unexpected {} (shape {})", name, show(t->shape)));
  if (problems.empty()) return ok();
  const size_t shown = std::min<size_t>(problems.size(), 12);
  std::string list = fmt::format(
      "{}", fmt::join(problems.begin(), problems.begin() + static_cast<long>(shown), "; "));
  if (shown < problems.size()) list += fmt::format("; and {} more", problems.size() - shown);
  return make_error(errc::incompatible_specs,
                    fmt::format("checkpoint does not match model_type {}: {}", c.model_type, list));
}

namespace {

std::vector<float> whole(const tensor_ref& t) {
  std::vector<float> out(static_cast<size_t>(t.elements()));
  to_float(t, 0, t.elements(), out.data());
  return out;
}

// Rows [begin, begin + n) of a 2-D (or the elements of a 1-D) tensor.
std::vector<float> rows(const tensor_ref& t, int64_t begin, int64_t n) {
  const int64_t width = t.shape.size() == 2 ? t.shape[1] : 1;
  std::vector<float> out(static_cast<size_t>(n * width));
  to_float(t, begin * width, n * width, out.data());
  return out;
}

// Columns [begin, begin + n) of a 2-D tensor, every row.
std::vector<float> columns(const tensor_ref& t, int64_t begin, int64_t n) {
  const int64_t r = t.shape[0], width = t.shape[1];
  std::vector<float> out(static_cast<size_t>(r * n));
  for (int64_t i = 0; i < r; ++i)
    to_float(t, i * width + begin, n, out.data() + i * n);
  return out;
}

void load_projections(const checkpoint& ck, const hf_decoder_config& c, const std::string& p,
                      kernels::decoder_layer_weights& L) {
  const auto r = rank_slices_of(c);
  const int64_t qw = static_cast<int64_t>(c.total_q_heads) * c.spec.head_dim;
  const int64_t kw = static_cast<int64_t>(c.total_kv_heads) * c.spec.head_dim;
  if (c.layout == projection_layout::fused) {
    const auto& qkv = *ck.find(p + "self_attn.qkv_proj.weight");
    L.q = rows(qkv, r.q_begin, r.q_rows);
    L.k = rows(qkv, qw + r.kv_begin, r.kv_rows);
    L.v = rows(qkv, qw + kw + r.kv_begin, r.kv_rows);
    const auto& gu = *ck.find(p + "mlp.gate_up_proj.weight");
    L.gate = rows(gu, r.inter_begin, r.inter_rows);
    L.up = rows(gu, c.total_intermediate + r.inter_begin, r.inter_rows);
  } else {
    L.q = rows(*ck.find(p + "self_attn.q_proj.weight"), r.q_begin, r.q_rows);
    L.k = rows(*ck.find(p + "self_attn.k_proj.weight"), r.kv_begin, r.kv_rows);
    L.v = rows(*ck.find(p + "self_attn.v_proj.weight"), r.kv_begin, r.kv_rows);
    L.gate = rows(*ck.find(p + "mlp.gate_proj.weight"), r.inter_begin, r.inter_rows);
    L.up = rows(*ck.find(p + "mlp.up_proj.weight"), r.inter_begin, r.inter_rows);
  }
  if (c.spec.qkv_bias) {
    L.q_bias = rows(*ck.find(p + "self_attn.q_proj.bias"), r.q_begin, r.q_rows);
    L.k_bias = rows(*ck.find(p + "self_attn.k_proj.bias"), r.kv_begin, r.kv_rows);
    L.v_bias = rows(*ck.find(p + "self_attn.v_proj.bias"), r.kv_begin, r.kv_rows);
  }
  L.o = columns(*ck.find(p + "self_attn.o_proj.weight"), r.q_begin, r.q_rows);
  L.down = columns(*ck.find(p + "mlp.down_proj.weight"), r.inter_begin, r.inter_rows);
}

void load_norms(const checkpoint& ck, const hf_decoder_config& c, const std::string& p,
                kernels::decoder_layer_weights& L) {
  L.input_norm = whole(*ck.find(p + "input_layernorm.weight"));
  L.post_attn_norm = whole(*ck.find(p + "post_attention_layernorm.weight"));
  if (c.spec.sandwich_norms) {
    L.pre_ffn_norm = whole(*ck.find(p + "pre_feedforward_layernorm.weight"));
    L.post_ffn_norm = whole(*ck.find(p + "post_feedforward_layernorm.weight"));
  }
  if (c.spec.qk_norm) {
    L.q_norm = whole(*ck.find(p + "self_attn.q_norm.weight"));
    L.k_norm = whole(*ck.find(p + "self_attn.k_norm.weight"));
  }
}

} // namespace

expected<kernels::decoder_weights> load_decoder_weights(const checkpoint& ck,
                                                        const hf_decoder_config& c) {
  if (auto checked = check_checkpoint_tensors(ck, c); !checked) return checked.err();
  kernels::decoder_weights w;
  w.embed = whole(*ck.find("model.embed_tokens.weight"));
  w.final_norm = whole(*ck.find("model.norm.weight"));
  if (!c.tie_embeddings) w.lm_head = whole(*ck.find("lm_head.weight"));
  for (size_t l = 0; l < c.spec.layers.size(); ++l) {
    const auto p = fmt::format("model.layers.{}.", l);
    kernels::decoder_layer_weights L;
    load_projections(ck, c, p, L);
    load_norms(ck, c, p, L);
    w.layers.push_back(std::move(L));
  }
  return w;
}

namespace {

void fill_generated(const hf_decoder_config& c, uint64_t seed, const std::string& name,
                    const tensor_ref& shape_of, std::vector<float>& v) {
  const auto g = generated_tensor_of(c, seed, name, shape_of.shape);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = g.centre + g.scale * static_cast<float>(2.0 * kernels::keyed_uniform(g.key, i) - 1.0);
}

} // namespace

// Matrices scaled by 1 / sqrt(fan-in), norms around their identity, biases small.
generated_tensor generated_tensor_of(const hf_decoder_config& c, uint64_t seed,
                                     const std::string& name, const std::vector<int64_t>& shape) {
  uint64_t h = 1469598103934665603ULL; // FNV-1a of the name
  for (unsigned char ch : name)
    h = (h ^ ch) * 1099511628211ULL;
  const bool norm = name.find("norm") != std::string::npos;
  const bool bias = name.ends_with(".bias");
  const double fan_in = shape.size() == 2 ? static_cast<double>(shape[1]) : 1.0;
  generated_tensor g;
  g.key = seed ^ h;
  g.scale = norm || bias ? 0.1f : static_cast<float>(1.0 / std::sqrt(fan_in));
  g.centre = norm && !c.spec.norm_one_plus_weight ? 1.0f : 0.0f;
  return g;
}

expected<hf_decoder_source> synthetic_hf_shapes(const nlohmann::json& config, int32_t tp,
                                                int32_t rank) {
  auto cfg = read_decoder_config(config, tp, rank);
  if (!cfg) return cfg.err();
  auto ck = checkpoint::shapes_only(checkpoint_tensors(*cfg));
  return hf_decoder_source{std::move(*cfg), std::move(ck)};
}

expected<hf_decoder_source> synthetic_hf_source(const nlohmann::json& config, int32_t tp,
                                                int32_t rank, uint64_t seed) {
  auto cfg = read_decoder_config(config, tp, rank);
  if (!cfg) return cfg.err();
  const auto shapes = checkpoint_tensors(*cfg);
  auto ck = checkpoint::in_memory(shapes, [&](const std::string& name, std::vector<float>& v) {
    tensor_ref t;
    for (const auto& [n, s] : shapes)
      if (n == name) t.shape = s;
    fill_generated(*cfg, seed, name, t, v);
  });
  return hf_decoder_source{std::move(*cfg), std::move(ck)};
}

expected<hf_decoder_model> synthetic_hf_decoder(const nlohmann::json& config, int32_t tp,
                                                int32_t rank, uint64_t seed) {
  auto src = synthetic_hf_source(config, tp, rank, seed);
  if (!src) return src.err();
  auto weights = load_decoder_weights(src->ckpt, src->config);
  if (!weights) return weights.err();
  return hf_decoder_model{std::move(src->config), std::move(*weights)};
}

expected<nlohmann::json> read_config_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::io_error, fmt::format("{}: cannot open", path));
  auto config = nlohmann::json::parse(in, nullptr, false);
  if (config.is_discarded())
    return make_error(errc::parse_error, fmt::format("{}: not valid JSON", path));
  return config;
}

expected<hf_decoder_source> open_hf_decoder(const std::string& dir, int32_t tp, int32_t rank) {
  const auto path = dir + "/config.json";
  auto config = read_config_json(path);
  if (!config) return config.err();
  auto cfg = read_decoder_config(*config, tp, rank);
  if (!cfg) return make_error(cfg.err().code, fmt::format("{}: {}", path, cfg.err().message));
  auto ck = checkpoint::open(dir);
  if (!ck) return ck.err();
  return hf_decoder_source{std::move(*cfg), std::move(*ck)};
}

expected<hf_decoder_model> load_hf_decoder(const std::string& dir, int32_t tp, int32_t rank) {
  auto src = open_hf_decoder(dir, tp, rank);
  if (!src) return src.err();
  auto weights = load_decoder_weights(src->ckpt, src->config);
  if (!weights)
    return make_error(weights.err().code, fmt::format("{}: {}", dir, weights.err().message));
  return hf_decoder_model{std::move(src->config), std::move(*weights)};
}

} // namespace kvactor
