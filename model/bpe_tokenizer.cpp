// A byte-level BPE tokenizer.json (Llama 3, Qwen2, GPT-2 style), encoded as Hugging Face's
// tokenizers library does: added tokens found literally, the rest normalised (NFC or not),
// pre-tokenized by the regex, mapped to the byte-level alphabet and merged by rank; the template
// adds the BOS. Anything else in the file is refused by name, never half-followed.
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/tokenizer.hpp"
#include "model/tokenizer_parts.hpp"

namespace kvactor {

namespace {

using nlohmann::json;
using namespace tokenizer_parts;

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string("?");
}

error refused(const std::string& file, const std::string& field, const std::string& why) {
  return make_error(errc::unsupported, fmt::format("{}: {}: {}", file, field, why));
}

error malformed(const std::string& file, const std::string& field, const std::string& why) {
  return make_error(errc::parse_error, fmt::format("{}: {}: {}", file, field, why));
}

// The post-processor's single-sequence template: ids before and after the text.
struct template_ids {
  std::vector<int32_t> before, after;
};

class bpe_tokenizer final : public tokenizer {
public:
  std::string file;
  bool nfc_normalize = false;
  std::vector<pre_step> steps;
  std::optional<bpe_model> model;
  added_matcher raw_added;        // matched in the raw text (normalized: false)
  added_matcher normalized_added; // matched after normalisation
  std::unordered_map<int32_t, added_token> added_by_id;
  template_ids post;
  int32_t size = 0;

  expected<std::vector<int32_t>> encode(std::string_view text,
                                        bool add_special_tokens) const override {
    if (const auto bad = utf8_invalid_at(text); bad != std::string_view::npos)
      return make_error(errc::invalid_argument, fmt::format("text: invalid UTF-8 at byte {}", bad));
    std::vector<int32_t> ids;
    if (add_special_tokens) ids = post.before;
    for (auto& raw : raw_added.split(text)) {
      if (raw.added_id >= 0) {
        ids.push_back(raw.added_id);
        continue;
      }
      auto normal = nfc_normalize ? nfc(raw.text) : expected<std::string>(std::move(raw.text));
      if (!normal) return normal.err();
      for (auto& piece : normalized_added.split(*normal)) {
        if (piece.added_id >= 0)
          ids.push_back(piece.added_id);
        else if (auto ok = encode_plain(std::move(piece.text), ids); !ok)
          return ok.err();
      }
    }
    if (add_special_tokens) ids.insert(ids.end(), post.after.begin(), post.after.end());
    return ids;
  }

  expected<std::string> decode(std::span<const int32_t> ids,
                               bool skip_special_tokens) const override {
    std::string bytes;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto token = token_of(ids[i], skip_special_tokens);
      if (!token)
        return make_error(
            errc::invalid_argument,
            fmt::format("ids[{}]: {} is not a token id of {} ({} ids)", i, ids[i], file, size));
      bytes += bytes_of(**token);
    }
    return utf8_lossy(bytes);
  }

  int32_t vocab_size() const override { return size; }
  std::string describe() const override { return fmt::format("byte-level BPE ({})", file); }

private:
  // The token's text; null for a special token being skipped; an error value when unknown.
  std::optional<const std::string*> token_of(int32_t id, bool skip_special) const {
    static const std::string nothing;
    if (const auto it = added_by_id.find(id); it != added_by_id.end())
      return skip_special && it->second.special ? &nothing : &it->second.content;
    const auto& has = model->has_id();
    if (id < 0 || static_cast<size_t>(id) >= has.size() || !has[static_cast<size_t>(id)])
      return std::nullopt;
    return &model->id_to_token()[static_cast<size_t>(id)];
  }

  // A token's bytes: its characters back through the byte-level alphabet, or its own UTF-8 when
  // one of them is outside it (an added token such as "<think> "), as the ByteLevel decoder does.
  static std::string bytes_of(const std::string& token) {
    std::string out;
    for (const auto ch : code_points(token)) {
      const auto it = unicode_to_byte().find(std::string(ch));
      if (it == unicode_to_byte().end()) return token;
      out += static_cast<char>(it->second);
    }
    return out;
  }

  status encode_plain(std::string text, std::vector<int32_t>& ids) const {
    auto words = pre_tokenize(steps, std::move(text));
    if (!words) return words.err();
    for (const auto& word : *words) {
      {
        std::lock_guard lock(cache_mutex_);
        if (const auto it = cache_.find(word); it != cache_.end()) {
          ids.insert(ids.end(), it->second.begin(), it->second.end());
          continue;
        }
      }
      std::vector<int32_t> word_ids;
      model->encode_word(word, word_ids);
      ids.insert(ids.end(), word_ids.begin(), word_ids.end());
      std::lock_guard lock(cache_mutex_);
      if (cache_.size() > max_cached_words) cache_.clear(); // bounds memory on endless text
      cache_.emplace(word, std::move(word_ids));
    }
    return ok();
  }

  static constexpr size_t max_cached_words = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

status read_normalizer(const json& j, bpe_tokenizer& t) {
  const auto& n = j.contains("normalizer") ? j["normalizer"] : json();
  if (n.is_null()) return ok();
  if (type_of(n) == "NFC") {
    t.nfc_normalize = true;
    return ok();
  }
  return refused(
      t.file, "normalizer",
      fmt::format("type '{}' is not supported (kvactor reads null and NFC)", type_of(n)));
}

expected<added_token> read_added(const json& a, const std::string& file, size_t i) {
  const auto field = fmt::format("added_tokens[{}]", i);
  if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || a["id"] < 0
      || !a.contains("content") || !a["content"].is_string() || a["content"] == "")
    return malformed(file, field, fmt::format("{} needs an id >= 0 and a content", a.dump()));
  if (a.value("single_word", false))
    return refused(file, field + ".single_word",
                   fmt::format("true is not supported ({})", a["content"].dump()));
  const bool special = a.value("special", false);
  return added_token{
      a["content"].get<std::string>(), a["id"].get<int32_t>(),   special,
      a.value("normalized", !special), a.value("lstrip", false), a.value("rstrip", false)};
}

status read_added_tokens(const json& j, bpe_tokenizer& t) {
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return ok();
  if (!j["added_tokens"].is_array()) return malformed(t.file, "added_tokens", "not a list");
  std::vector<added_token> raw, normalized;
  for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
    auto a = read_added(j["added_tokens"][i], t.file, i);
    if (!a) return a.err();
    t.added_by_id[a->id] = *a;
    t.size = std::max(t.size, a->id + 1);
    (a->normalized && t.nfc_normalize ? normalized : raw).push_back(*a);
  }
  t.raw_added = added_matcher(std::move(raw));
  t.normalized_added = added_matcher(std::move(normalized));
  return ok();
}

// One TemplateProcessing's "single": special tokens around the one "$A" sequence.
status read_template(const json& p, const std::string& field, bpe_tokenizer& t) {
  if (!p.contains("single") || !p["single"].is_array())
    return malformed(t.file, field + ".single", "missing or not a list");
  bool seen_sequence = false;
  for (size_t i = 0; i < p["single"].size(); ++i) {
    const auto& item = p["single"][i];
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const auto name = item.contains("SpecialToken") ? item["SpecialToken"].value("id", "") : "";
    const auto& specials = p.contains("special_tokens") ? p["special_tokens"] : json();
    if (!specials.contains(name) || !specials[name].contains("ids")
        || !specials[name]["ids"].is_array())
      return malformed(t.file, fmt::format("{}.single[{}]", field, i),
                       fmt::format("{} names no entry of special_tokens", item.dump()));
    for (const auto& id : specials[name]["ids"])
      (seen_sequence ? t.post.after : t.post.before).push_back(id.get<int32_t>());
  }
  return ok();
}

status read_post_processor(const json& p, const std::string& field, bpe_tokenizer& t) {
  const auto type = p.is_null() ? std::string("null") : type_of(p);
  if (type == "null" || type == "ByteLevel") return ok(); // ByteLevel only trims offsets
  if (type == "TemplateProcessing") return read_template(p, field, t);
  if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    for (size_t i = 0; i < p["processors"].size(); ++i)
      if (auto ok = read_post_processor(p["processors"][i],
                                        fmt::format("{}.processors[{}]", field, i), t);
          !ok)
        return ok;
    return ok();
  }
  return refused(t.file, field,
                 fmt::format("type '{}' is not supported (kvactor reads TemplateProcessing, "
                             "ByteLevel, Sequence and null)",
                             type));
}

status read_pipeline(const json& j, bpe_tokenizer& t) {
  const auto& model = j.contains("model") ? j["model"] : json();
  if (type_of(model) != "BPE")
    return refused(t.file, "model.type",
                   fmt::format("'{}' is not supported (kvactor reads BPE; a SentencePiece "
                               "tokenizer.model is read too)",
                               type_of(model)));
  if (auto ok = read_normalizer(j, t); !ok) return ok;
  auto steps = parse_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(),
                                   "pre_tokenizer");
  if (!steps)
    return make_error(steps.err().code, fmt::format("{}: {}", t.file, steps.err().message));
  t.steps = std::move(*steps);
  if (std::none_of(t.steps.begin(), t.steps.end(),
                   [](const auto& s) { return s.what == pre_step::kind::byte_level; }))
    return refused(t.file, "pre_tokenizer", "has no ByteLevel step (kvactor reads byte-level BPE)");
  const auto& decoder = j.contains("decoder") ? j["decoder"] : json();
  if (type_of(decoder) != "ByteLevel")
    return refused(t.file, "decoder",
                   fmt::format("type '{}' is not supported (kvactor reads ByteLevel)",
                               decoder.is_null() ? "null" : type_of(decoder)));
  auto m = bpe_model::parse(model, t.file);
  if (!m) return m.err();
  t.model = std::move(*m);
  t.size = static_cast<int32_t>(t.model->id_to_token().size());
  if (auto ok = read_added_tokens(j, t); !ok) return ok;
  return read_post_processor(j.contains("post_processor") ? j["post_processor"] : json(),
                             "post_processor", t);
}

} // namespace

expected<std::unique_ptr<tokenizer>> load_bpe_tokenizer(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::io_error, fmt::format("{}: cannot be read", path));
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    return make_error(errc::parse_error, fmt::format("{}: not JSON: {}", path, e.what()));
  }
  if (!j.is_object()) return malformed(path, "top level", "not an object");
  auto t = std::make_unique<bpe_tokenizer>();
  t->file = path;
  try { // a field of the wrong type where a reader takes a value as given (found by fuzzing)
    if (auto ok = read_pipeline(j, *t); !ok) return ok.err();
  } catch (const json::exception& e) {
    return make_error(errc::parse_error, fmt::format("{}: {}", path, e.what()));
  }
  return std::unique_ptr<tokenizer>(std::move(t));
}

} // namespace kvactor
