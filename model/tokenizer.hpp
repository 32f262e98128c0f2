// Text <-> token ids for a Hugging Face model directory (pure C++, no CAF use): byte-level BPE
// from tokenizer.json (Llama 3, Qwen, GPT-2 style) and SentencePiece from tokenizer.model.
// Every failure is a value naming the file, the field and the value at fault.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

class tokenizer {
public:
  virtual ~tokenizer() = default;

  /// The ids of `text` (valid UTF-8); with `add_special_tokens` the model's BOS (or template).
  virtual expected<std::vector<int32_t>> encode(std::string_view text,
                                                bool add_special_tokens) const = 0;

  /// The text of `ids`: always valid UTF-8 (a byte sequence that is not becomes U+FFFD, as
  /// Hugging Face decodes); an id the tokenizer does not know is an error naming its position.
  virtual expected<std::string> decode(std::span<const int32_t> ids,
                                       bool skip_special_tokens) const = 0;

  /// One past the largest id the tokenizer can produce.
  virtual int32_t vocab_size() const = 0;

  /// What was loaded, for messages: "byte-level BPE (DIR/tokenizer.json)".
  virtual std::string describe() const = 0;
};

/// The tokenizer of a model directory: tokenizer.json when it holds a byte-level BPE, else
/// tokenizer.model (SentencePiece, with tokenizer_config.json's add_bos_token / add_eos_token).
/// errc::io_error when the directory has neither file; errc::unsupported names the kind refused.
expected<std::unique_ptr<tokenizer>> load_tokenizer(const std::string& model_dir);

/// One tokenizer.json (byte-level BPE).
expected<std::unique_ptr<tokenizer>> load_bpe_tokenizer(const std::string& tokenizer_json);

/// One tokenizer.model; `config_json` (tokenizer_config.json) may not exist.
expected<std::unique_ptr<tokenizer>> load_sentencepiece_tokenizer(const std::string& model_file,
                                                                  const std::string& config_json);

/// Text as ids arrive, for streaming: push() returns only whole characters (a character split
/// across tokens waits for its last byte), and the pieces pushed and finished concatenate to
/// decode() of all the ids. Each call decodes the ids since the last piece it returned, with that
/// piece's ids as context, so that a tokenizer whose decoding depends on its neighbours (the
/// SentencePiece leading space) streams as it decodes.
class incremental_decoder {
public:
  incremental_decoder(const tokenizer& t, bool skip_special_tokens);

  expected<std::string> push(int32_t id);

  /// What is still held (an incomplete character ends as U+FFFD, as decode() gives it).
  expected<std::string> finish();

private:
  const tokenizer* tok_;
  bool skip_special_;
  std::vector<int32_t> ids_; // the context ids, then those not yet returned
  size_t context_ = 0;       // how many of ids_ are context
  std::string context_text_; // decode() of the context alone
};

/// Bytes -> valid UTF-8, each maximal invalid subsequence replaced by one U+FFFD (Rust's
/// String::from_utf8_lossy, which Hugging Face's byte-level decoder uses).
std::string utf8_lossy(std::string_view bytes);

/// The offset of the first byte that does not begin a valid UTF-8 character, or npos.
size_t utf8_invalid_at(std::string_view bytes);

} // namespace kvactor
