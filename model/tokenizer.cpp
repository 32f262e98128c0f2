#include "model/tokenizer.hpp"

#include <filesystem>

#include <fmt/format.h>

namespace kvactor {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD

// The length of the valid character starting at s[i], or 0 and in `bad` how many bytes form the
// maximal invalid subpart there (at least 1). `complete` is false when the input ends inside a
// character that could still be valid.
size_t char_at(std::string_view s, size_t i, size_t& bad, bool& complete) {
  const auto b = static_cast<unsigned char>(s[i]);
  complete = true;
  bad = 1;
  if (b < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF; // the second byte's range (Unicode table 3-7)
  if (b >= 0xC2 && b <= 0xDF)
    need = 1;
  else if (b == 0xE0)
    need = 2, lo = 0xA0;
  else if (b == 0xED)
    need = 2, hi = 0x9F;
  else if (b >= 0xE1 && b <= 0xEF)
    need = 2;
  else if (b == 0xF0)
    need = 3, lo = 0x90;
  else if (b == 0xF4)
    need = 3, hi = 0x8F;
  else if (b >= 0xF1 && b <= 0xF3)
    need = 3;
  else
    return 0;
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      complete = false;
      bad = k;
      return 0;
    }
    const auto c = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) {
      bad = k;
      return 0;
    }
  }
  return need + 1;
}

bool ends_with_replacement(const std::string& s) {
  return s.size() >= replacement.size()
         && std::string_view(s).substr(s.size() - replacement.size()) == replacement;
}

} // namespace

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = 0;
    bool complete = true;
    if (const auto n = char_at(bytes, i, bad, complete); n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append(replacement);
      i += bad;
    }
  }
  return out;
}

size_t utf8_invalid_at(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = 0;
    bool complete = true;
    const auto n = char_at(bytes, i, bad, complete);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

expected<std::unique_ptr<tokenizer>> load_tokenizer(const std::string& model_dir) {
  const auto json_path = (fs::path(model_dir) / "tokenizer.json").string();
  const auto spm_path = (fs::path(model_dir) / "tokenizer.model").string();
  const bool has_json = fs::is_regular_file(json_path);
  const bool has_spm = fs::is_regular_file(spm_path);
  if (!has_json && !has_spm)
    return make_error(errc::io_error, fmt::format("{}: no tokenizer (looked for tokenizer.json and "
                                                  "tokenizer.model)",
                                                  model_dir));
  if (has_json) {
    auto bpe = load_bpe_tokenizer(json_path);
    // Llama 2 style directories hold both, and their tokenizer.json is not byte-level: the
    // SentencePiece model is the same tokenizer.
    if (bpe || !has_spm || bpe.err().code != errc::unsupported) return bpe;
  }
  return load_sentencepiece_tokenizer(spm_path,
                                      (fs::path(model_dir) / "tokenizer_config.json").string());
}

incremental_decoder::incremental_decoder(const tokenizer& t, bool skip_special_tokens)
    : tok_(&t), skip_special_(skip_special_tokens) {}

expected<std::string> incremental_decoder::push(int32_t id) {
  ids_.push_back(id);
  auto text = tok_->decode(ids_, skip_special_);
  if (!text) {
    ids_.pop_back();
    return text.err();
  }
  // Hold while the text has not grown or ends inside a character (decode shows that as U+FFFD),
  // or while the context no longer decodes to the same prefix (a neighbour changed it).
  if (text->size() <= context_text_.size() || ends_with_replacement(*text)
      || text->compare(0, context_text_.size(), context_text_) != 0)
    return std::string{};
  auto piece = text->substr(context_text_.size());
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(context_));
  context_ = ids_.size();
  auto context = tok_->decode(ids_, skip_special_);
  if (!context) return context.err();
  context_text_ = std::move(*context);
  return piece;
}

expected<std::string> incremental_decoder::finish() {
  auto text = tok_->decode(ids_, skip_special_);
  if (!text) return text.err();
  if (text->compare(0, context_text_.size(), context_text_) != 0)
    return make_error(errc::invalid_argument,
                      fmt::format("incremental decode: the held ids no longer decode after "
                                  "their context '{}'",
                                  context_text_));
  auto rest = text->substr(context_text_.size());
  ids_.clear();
  context_ = 0;
  context_text_.clear();
  return rest;
}

} // namespace kvactor
