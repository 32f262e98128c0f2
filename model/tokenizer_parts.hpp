// The pieces the tokenizers are built from, each tested through them: literal matching of added
// tokens, the pre-tokenizer steps (regex splits on PCRE2, the byte-level alphabet), NFC.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "messages/errc.hpp"

namespace kvactor::tokenizer_parts {

// --- added tokens (added_tokens.cpp) ---

struct added_token {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool normalized = false; // matched in the normalised text rather than the raw text
  bool lstrip = false;     // the match takes the whitespace on its left
  bool rstrip = false;     // and on its right
};

/// A stretch of text, or an added token found in it (id >= 0).
struct segment {
  std::string text;
  int32_t added_id = -1;
};

/// Literal matching of added tokens, leftmost first and the longest at a position (as Hugging
/// Face's added vocabulary matches them).
class added_matcher {
public:
  added_matcher() = default;
  explicit added_matcher(std::vector<added_token> tokens);

  /// `text` cut into plain stretches and added tokens, in order; empty stretches are dropped.
  std::vector<segment> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

private:
  std::vector<added_token> tokens_;
  std::array<std::vector<size_t>, 256> by_first_byte_; // longest first
};

// --- pre-tokenizer steps (pretokenizer.cpp) ---

/// A compiled PCRE2 pattern (UTF and Unicode properties), shared by every encode call.
class regex {
public:
  /// `literal`: the pattern is a plain string (Split's {"String": ...}).
  static expected<std::shared_ptr<const regex>> compile(const std::string& pattern, bool literal);
  ~regex();
  regex(const regex&) = delete;
  regex& operator=(const regex&) = delete;

  /// The [begin, end) byte ranges of the successive matches in `text`; an error when PCRE2 gives
  /// up (a match or stack limit), never a silently shorter list.
  expected<std::vector<std::pair<size_t, size_t>>> matches(std::string_view text) const;

private:
  regex() = default;
  void* code_ = nullptr; // pcre2_code_8
};

/// The GPT-2 split pattern ByteLevel's use_regex applies.
inline constexpr const char* gpt2_pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/// One step of a pre_tokenizer: a Split or a ByteLevel.
struct pre_step {
  enum class kind { split, byte_level } what = kind::split;
  std::shared_ptr<const regex> pattern; // split, or byte_level with use_regex
  bool remove_matches = false;          // Split behavior Removed (else Isolated)
  bool add_prefix_space = false;        // byte_level
};

/// `pre_tokenizer` of tokenizer.json -> its steps; errors name `field` (e.g. "pre_tokenizer")
/// and the type or value refused.
expected<std::vector<pre_step>> parse_pre_tokenizer(const nlohmann::json& j,
                                                    const std::string& field);

/// `text` through every step: the pre-tokens (in the byte-level alphabet once a ByteLevel step
/// ran).
expected<std::vector<std::string>> pre_tokenize(const std::vector<pre_step>& steps,
                                                std::string text);

/// GPT-2's bytes -> printable characters (UTF-8 of each), and back.
const std::array<std::string, 256>& byte_to_unicode();
const std::unordered_map<std::string, uint8_t>& unicode_to_byte();
std::string to_byte_level(std::string_view bytes);

// --- normalizer (pretokenizer.cpp) ---

/// Unicode NFC (ICU's).
expected<std::string> nfc(std::string_view text);

/// The UTF-8 code points of `s`, each as its bytes (s is valid UTF-8).
std::vector<std::string_view> code_points(std::string_view s);

// --- the BPE model (bpe_model.cpp) ---

/// tokenizer.json's "model" of type BPE: vocabulary, merge ranks, and how a pre-token whose
/// characters are not all in the vocabulary is handled.
class bpe_model {
public:
  /// Errors name `file` and the field (model.vocab, model.merges[i], ...) with the value.
  static expected<bpe_model> parse(const nlohmann::json& model, const std::string& file);

  /// The ids of one pre-token (already in the byte-level alphabet).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  const std::vector<bool>& has_id() const { return has_id_; }

private:
  struct merge {
    int32_t rank = 0;
    int32_t result = 0; // the merged token's id
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const merge* find_merge(int32_t a, int32_t b) const;
  void symbols_of(std::string_view word, std::vector<int32_t>& ids) const;
  void apply_merges(std::vector<int32_t>& ids) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, merge> merges_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
};

} // namespace kvactor::tokenizer_parts
