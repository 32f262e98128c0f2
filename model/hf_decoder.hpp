// A Hugging Face dense decoder as kvactor runs it: config.json read into the CPU decoder's spec
// (one rank's share of the heads and the MLP), and the checkpoint's tensors checked by name,
// shape and dtype and sliced for that rank. Families: llama, mistral, qwen2, qwen3, gemma2,
// gemma3_text, phi3. Mixture-of-experts families plan (loader.hpp) but are refused here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvactor/kernels/decoder.h"
#include "messages/errc.hpp"
#include "model/safetensors.hpp"

namespace kvactor {

/// How the checkpoint stores a layer's projections.
enum class projection_layout : uint8_t {
  separate, // q_proj/k_proj/v_proj, gate_proj/up_proj
  fused,    // phi3: qkv_proj, gate_up_proj
};

struct hf_decoder_config {
  std::string model_type;
  kernels::decoder_spec spec; // this rank's share
  int32_t total_q_heads = 0, total_kv_heads = 0, total_intermediate = 0;
  int32_t tp = 1, rank = 0;
  bool tie_embeddings = false;
  projection_layout layout = projection_layout::separate;
  std::vector<int32_t> eos_token_ids; // config.json's eos_token_id (generation_config may add)
};

/// A config's eos_token_id (an id or a list) as ids; empty when it names none.
expected<std::vector<int32_t>> eos_token_ids_of(const nlohmann::json& config,
                                                std::string_view file);

/// A config.json, parsed; errors name the file (cannot open, not valid JSON).
expected<nlohmann::json> read_config_json(const std::string& path);

/// The end-of-sequence ids of a model directory: generation_config.json's eos_token_id when it
/// has one, else config.json's. A generation_config.json that is not a JSON object, or an
/// eos_token_id that is not a token id or a list of them, is an error naming the file and field.
expected<std::vector<int32_t>> model_eos_token_ids(const std::string& dir);

/// The dense families `run` executes (config.json's model_type).
bool is_dense_decoder_family(const std::string& model_type);

/// Reads config.json (parsed) for rank `rank` of `tp`. Errors name the field and value; a family
/// kvactor plans but cannot run (mixture of experts, hybrid, encoder) says so.
expected<hf_decoder_config> read_decoder_config(const nlohmann::json& config, int32_t tp,
                                                int32_t rank);

/// Every tensor the architecture needs is present with its shape, and nothing else is (rotary
/// caches and a tied lm_head aside): one error naming each mismatch.
status check_checkpoint_tensors(const checkpoint& ckpt, const hf_decoder_config& cfg);

/// This rank's weights. Every tensor the architecture needs must be present with its shape, and
/// nothing else may be (rotary caches and a tied lm_head aside); all mismatches are reported in
/// one error that names each tensor, the expected and the found shape.
expected<kernels::decoder_weights> load_decoder_weights(const checkpoint& ckpt,
                                                        const hf_decoder_config& cfg);

/// Where this rank's share starts, in rows of the checkpoint's [heads * head_dim, hidden] and
/// [intermediate, hidden] projections (columns of o_proj and down_proj).
struct rank_slices {
  int64_t q_begin, q_rows, kv_begin, kv_rows, inter_begin, inter_rows;
};
rank_slices rank_slices_of(const hf_decoder_config& cfg);

/// The tensors a checkpoint of this config holds (global shapes), in load order.
std::vector<std::pair<std::string, std::vector<int64_t>>>
checkpoint_tensors(const hf_decoder_config& cfg);

struct hf_decoder_model {
  hf_decoder_config config;
  kernels::decoder_weights weights;
};

/// The whole decoder of `config` with generated weights (--load-format synthetic): every tensor a
/// checkpoint would hold, from `seed`, the same global values on every rank, sliced as a
/// checkpoint is. For benchmarks at real shapes without the weights.
expected<hf_decoder_model> synthetic_hf_decoder(const nlohmann::json& config, int32_t tp,
                                                int32_t rank, uint64_t seed);

/// A decoder's config and the checkpoint its weights come from, before any weight is read.
struct hf_decoder_source {
  hf_decoder_config config;
  checkpoint ckpt;
};

/// How --load-format synthetic generates a tensor: element i (its row-major index in the whole,
/// unsliced tensor) is, in float, centre + scale * float(2 * keyed_uniform(key, i) - 1): the same
/// on every rank and device, so that ranks hold slices of one model.
struct generated_tensor {
  uint64_t key = 0;
  float scale = 0.0f, centre = 0.0f;
};
generated_tensor generated_tensor_of(const hf_decoder_config& cfg, uint64_t seed,
                                     const std::string& name, const std::vector<int64_t>& shape);

/// `config`'s tensors as shapes alone (no values): what the GPU plans and generates on the device.
expected<hf_decoder_source> synthetic_hf_shapes(const nlohmann::json& config, int32_t tp,
                                                int32_t rank);

/// config.json and the mapped safetensors of a model directory (nothing read yet).
expected<hf_decoder_source> open_hf_decoder(const std::string& dir, int32_t tp, int32_t rank);

/// `config`'s tensors generated in host memory from `seed` (as synthetic_hf_decoder).
expected<hf_decoder_source> synthetic_hf_source(const nlohmann::json& config, int32_t tp,
                                                int32_t rank, uint64_t seed);

/// config.json and the safetensors of a model directory, for rank `rank` of `tp`.
expected<hf_decoder_model> load_hf_decoder(const std::string& dir, int32_t tp = 1,
                                           int32_t rank = 0);

} // namespace kvactor
