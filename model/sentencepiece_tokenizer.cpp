// A SentencePiece tokenizer.model through Debian's libsentencepiece, shaped like the tokenizer
// Hugging Face converts it to (Llama 2, Mistral): control and unknown pieces written in the text
// are those tokens, each stretch between them is encoded alone (its own "▁" prefix), BOS per
// tokenizer_config.json's add_bos_token else the model's bos piece, and decoding drops one
// leading space and turns byte pieces back into bytes.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sentencepiece_processor.h>

#include "model/tokenizer.hpp"
#include "model/tokenizer_parts.hpp"

namespace kvactor {

namespace {

using nlohmann::json;
using namespace tokenizer_parts;

constexpr std::string_view space_mark = "\xE2\x96\x81"; // U+2581, SentencePiece's space

class sentencepiece_tokenizer final : public tokenizer {
public:
  std::string file;
  sentencepiece::SentencePieceProcessor sp;
  added_matcher specials; // control and unknown pieces, found literally in the text
  bool add_bos = false;
  bool add_eos = false;

  expected<std::vector<int32_t>> encode(std::string_view text,
                                        bool add_special_tokens) const override {
    if (const auto bad = utf8_invalid_at(text); bad != std::string_view::npos)
      return make_error(errc::invalid_argument, fmt::format("text: invalid UTF-8 at byte {}", bad));
    std::vector<int32_t> ids;
    if (add_special_tokens && add_bos) ids.push_back(sp.bos_id());
    for (const auto& s : specials.split(text)) {
      if (s.added_id >= 0) {
        ids.push_back(s.added_id);
        continue;
      }
      std::vector<int> piece_ids;
      if (const auto st = sp.Encode(s.text, &piece_ids); !st.ok())
        return make_error(errc::invalid_argument,
                          fmt::format("{}: encode failed: {}", file, st.ToString()));
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    }
    if (add_special_tokens && add_eos) ids.push_back(sp.eos_id());
    return ids;
  }

  expected<std::string> decode(std::span<const int32_t> ids,
                               bool skip_special_tokens) const override {
    std::string out, byte_run;
    size_t byte_pieces = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto id = ids[i];
      if (id < 0 || id >= sp.GetPieceSize())
        return make_error(errc::invalid_argument,
                          fmt::format("ids[{}]: {} is not a token id of {} ({} ids)", i, id, file,
                                      sp.GetPieceSize()));
      if (sp.IsByte(id)) {
        byte_run += static_cast<char>(std::stoi(sp.IdToPiece(id).substr(3, 2), nullptr, 16));
        ++byte_pieces;
        continue;
      }
      flush_bytes(byte_run, byte_pieces, out);
      if ((sp.IsControl(id) || sp.IsUnknown(id)) && skip_special_tokens) continue;
      out += spaces_of(sp.IdToPiece(id));
    }
    flush_bytes(byte_run, byte_pieces, out);
    if (out.starts_with(' ')) out.erase(0, 1); // the prefix SentencePiece put before the text
    return out;
  }

  int32_t vocab_size() const override { return sp.GetPieceSize(); }
  std::string describe() const override { return fmt::format("SentencePiece ({})", file); }

private:
  // A run of byte pieces is its bytes when they are valid UTF-8, else one U+FFFD per piece (as
  // Hugging Face's ByteFallback decoder gives it).
  static void flush_bytes(std::string& run, size_t& pieces, std::string& out) {
    if (run.empty()) return;
    if (utf8_invalid_at(run) == std::string_view::npos)
      out += run;
    else
      for (size_t i = 0; i < pieces; ++i)
        out += "\xEF\xBF\xBD";
    run.clear();
    pieces = 0;
  }

  static std::string spaces_of(const std::string& piece) {
    std::string out;
    for (size_t at = 0; at < piece.size();) {
      if (piece.compare(at, space_mark.size(), space_mark) == 0) {
        out += ' ';
        at += space_mark.size();
      } else {
        out += piece[at++];
      }
    }
    return out;
  }
};

// add_bos_token / add_eos_token from tokenizer_config.json when it says; a value that is not a
// boolean is an error naming it.
status read_config(const std::string& path, sentencepiece_tokenizer& t) {
  t.add_bos = t.sp.bos_id() >= 0;
  if (!std::filesystem::is_regular_file(path)) return ok();
  std::ifstream in(path);
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    return make_error(errc::parse_error, fmt::format("{}: not JSON: {}", path, e.what()));
  }
  for (auto [key, target] :
       {std::pair{"add_bos_token", &t.add_bos}, {"add_eos_token", &t.add_eos}}) {
    if (!j.is_object() || !j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_boolean())
      return make_error(errc::parse_error,
                        fmt::format("{}: {}: {} is not true or false", path, key, j[key].dump()));
    *target = j[key].get<bool>();
  }
  if ((t.add_bos && t.sp.bos_id() < 0) || (t.add_eos && t.sp.eos_id() < 0))
    return make_error(errc::invalid_argument,
                      fmt::format("{}: add_{}_token is true but {} has no such piece", path,
                                  t.add_bos && t.sp.bos_id() < 0 ? "bos" : "eos", t.file));
  return ok();
}

} // namespace

expected<std::unique_ptr<tokenizer>> load_sentencepiece_tokenizer(const std::string& model_file,
                                                                  const std::string& config_json) {
  auto t = std::make_unique<sentencepiece_tokenizer>();
  t->file = model_file;
  if (const auto st = t->sp.Load(model_file); !st.ok())
    return make_error(st.code() == sentencepiece::util::StatusCode::kNotFound ? errc::io_error
                                                                              : errc::parse_error,
                      fmt::format("{}: not a SentencePiece model: {}", model_file, st.ToString()));
  std::vector<added_token> specials;
  for (int id = 0; id < t->sp.GetPieceSize(); ++id)
    if (t->sp.IsControl(id) || t->sp.IsUnknown(id))
      specials.push_back({t->sp.IdToPiece(id), id, true, false, false, false});
  t->specials = added_matcher(std::move(specials));
  if (auto ok = read_config(config_json, *t); !ok) return ok.err();
  return std::unique_ptr<tokenizer>(std::move(t));
}

} // namespace kvactor
