// Metadata builders (docs/vllm-semantics.md §5.4) and the per-step build of every layer's
// attention metadata (§1.12). Pure C++, no CAF; the builder actor owns the builders and calls this
// once per ubatch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/metadata/common_metadata.hpp"
#include "actors/metadata/fast_prefill.hpp"
#include "messages/backend.hpp"
#include "messages/errc.hpp"

namespace kvactor {

/// What a backend's builder produces; backends derive to add their own fields. Immutable once
/// built: every layer of an attention group shares one object.
struct backend_metadata {
  virtual ~backend_metadata() = default;
  std::string backend;
  common_attention_metadata common;
};

/// One per (KV cache group, attention group, ubatch). A builder may keep persistent buffers, so
/// build is not const; builders of different ubatches share no state.
class metadata_builder {
public:
  virtual ~metadata_builder();

  /// The metadata for one step. common_prefix_len is the cascade-attention prefix (always 0:
  /// cascade attention is not used).
  virtual std::shared_ptr<const backend_metadata> build(int32_t common_prefix_len,
                                                        const common_attention_metadata& m) = 0;

  /// The metadata a FULL graph is captured with; backends override it to make capture cheap or
  /// safe (e.g. seq_lens of 1).
  virtual std::shared_ptr<const backend_metadata>
  build_for_cudagraph_capture(const common_attention_metadata& m) {
    return build(0, m);
  }
};

/// The CPU reference backend's builder: its metadata is the common metadata itself.
class reference_builder final : public metadata_builder {
public:
  explicit reference_builder(std::string backend = "reference") : backend_(std::move(backend)) {}

  std::shared_ptr<const backend_metadata> build(int32_t common_prefix_len,
                                                const common_attention_metadata& m) override;

private:
  std::string backend_;
};

/// [KV cache group][attention group][ubatch] builders, index-aligned with attn_groups.
using builder_table = std::vector<std::vector<std::vector<std::unique_ptr<metadata_builder>>>>;

/// One KV cache group's block table and slot mapping for this step.
struct group_tables {
  std::span<const int32_t> block_table; // [>= num_reqs x width] row-major kernel block ids
  int32_t width = 0;
  std::span<const int64_t> slot_mapping; // [>= num_tokens] -1 = padding
};

/// The inputs of one build. With a FULL graph the counts are the padded ones (§6.4).
struct attention_inputs {
  std::vector<group_tables> groups;     // [num KV cache groups]
  std::vector<int32_t> query_start_loc; // [>= num_reqs + 1], truncated to num_reqs + 1
  std::vector<int32_t> seq_lens;        // [>= num_reqs], truncated to num_reqs
  int32_t num_reqs = 0;
  int32_t num_tokens = 0;
  int32_t max_query_len = 0;
  int32_t max_seq_len = 0;            // max_model_len while capturing
  std::span<const int64_t> positions; // [>= num_tokens] or empty
  std::vector<bool> is_prefilling;    // [>= num_reqs] or empty, truncated to num_reqs
  std::map<int32_t, bool> causal;     // KV cache group -> causal; absent = true
  std::optional<fast_prefill_metadata> fast_prefill;
  int32_t ubatch_idx = 0;
  bool for_cudagraph_capture = false;
};

using layer_metadata = std::map<std::string, std::shared_ptr<const backend_metadata>>;

/// §1.12: for every KV cache group i with attention groups, one common metadata (num_actual_tokens
/// = num_tokens, group i's block table rows and slot mapping, causal.at(i) or true, fast-prefill
/// fields when given); for every attention group of i, builder [i][j][ubatch_idx] builds it once
/// (build_for_cudagraph_capture when capturing, else build with common_prefix_len 0) and every
/// layer of the attention group maps to that same object.
/// Fails with errc::invalid_argument naming the field and value when the builder table or
/// in.groups does not match attn_groups, ubatch_idx is out of range, a builder is missing or
/// returns nothing, an input buffer is too short, the resulting common metadata is invalid (see
/// validate), or a layer appears in two attention groups.
expected<layer_metadata> build_attention_metadata(
    const std::vector<std::vector<attention_group>>& attn_groups, // [KV cache group][group]
    builder_table& builders, const attention_inputs& in);

} // namespace kvactor
