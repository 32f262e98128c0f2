// The BPE model of a tokenizer.json: vocabulary and merges read and checked against each other,
// and a pre-token merged by rank with a priority queue over its symbols (O(n log n) per word).
#include <queue>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/tokenizer_parts.hpp"

namespace kvactor::tokenizer_parts {

namespace {

using nlohmann::json;

error bad(const std::string& file, const std::string& field, const std::string& why) {
  return make_error(errc::parse_error, fmt::format("{}: {}: {}", file, field, why));
}

// A merge as its two tokens: "a b" (older files) or ["a", "b"].
expected<std::pair<std::string, std::string>> merge_pair(const json& m, const std::string& file,
                                                         const std::string& field) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return std::pair{m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const auto s = m.get<std::string>();
    const auto space = s.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < s.size()
        && s.find(' ', space + 1) == std::string::npos)
      return std::pair{s.substr(0, space), s.substr(space + 1)};
  }
  return bad(file, field, fmt::format("{} is not \"a b\" or [\"a\", \"b\"]", m.dump()));
}

status check_model_options(const json& m, const std::string& file) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(key) && !m[key].is_null() && m[key] != "")
      return make_error(errc::unsupported,
                        fmt::format("{}: model.{}: {} is not supported (byte-level BPE has none)",
                                    file, key, m[key].dump()));
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"] != 0.0)
    return make_error(errc::unsupported,
                      fmt::format("{}: model.dropout: {} is not supported (encoding is "
                                  "deterministic)",
                                  file, m["dropout"].dump()));
  return ok();
}

} // namespace

expected<bpe_model> bpe_model::parse(const json& m, const std::string& file) {
  if (auto ok = check_model_options(m, file); !ok) return ok.err();
  if (!m.contains("vocab") || !m["vocab"].is_object())
    return bad(file, "model.vocab", "missing or not an object of token: id");
  bpe_model b;
  for (const auto& [token, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
      return bad(file, fmt::format("model.vocab[\"{}\"]", token),
                 fmt::format("{} is not a token id", id.dump()));
    const auto i = id.get<int32_t>();
    b.vocab_.emplace(token, i);
    if (static_cast<size_t>(i) >= b.id_to_token_.size()) {
      b.id_to_token_.resize(static_cast<size_t>(i) + 1);
      b.has_id_.resize(static_cast<size_t>(i) + 1);
    }
    b.id_to_token_[static_cast<size_t>(i)] = token;
    b.has_id_[static_cast<size_t>(i)] = true;
  }
  if (!m.contains("merges") || !m["merges"].is_array())
    return bad(file, "model.merges", "missing or not a list");
  const auto& merges = m["merges"];
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto field = fmt::format("model.merges[{}]", r);
    auto pair = merge_pair(merges[r], file, field);
    if (!pair) return pair.err();
    const auto& [a, c] = *pair;
    for (const auto& token : {a, c, a + c}) {
      if (!b.vocab_.contains(token))
        return bad(
            file, field,
            fmt::format("{} names '{}', which is not in model.vocab", merges[r].dump(), token));
    }
    b.merges_.try_emplace(pair_key(b.vocab_[a], b.vocab_[c]),
                          merge{static_cast<int32_t>(r), b.vocab_[a + c]});
  }
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    const auto unk = m["unk_token"].get<std::string>();
    if (!b.vocab_.contains(unk))
      return bad(file, "model.unk_token", fmt::format("'{}' is not in model.vocab", unk));
    b.unk_id_ = b.vocab_[unk];
  }
  b.fuse_unk_ = m.value("fuse_unk", false);
  b.byte_fallback_ = m.value("byte_fallback", false);
  b.ignore_merges_ = m.value("ignore_merges", false);
  return b;
}

const bpe_model::merge* bpe_model::find_merge(int32_t a, int32_t b) const {
  const auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

// One symbol per character; a character outside the vocabulary becomes its <0xNN> byte tokens
// (byte_fallback), else the unknown token (consecutive ones fused with fuse_unk), else nothing,
// as Hugging Face's BPE does without an unk_token.
void bpe_model::symbols_of(std::string_view word, std::vector<int32_t>& ids) const {
  bool last_unk = false;
  for (const auto ch : code_points(word)) {
    if (const auto it = vocab_.find(std::string(ch)); it != vocab_.end()) {
      ids.push_back(it->second);
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (const char c : ch)
        if (const auto it = vocab_.find(fmt::format("<0x{:02X}>", static_cast<unsigned char>(c)));
            it != vocab_.end())
          bytes.push_back(it->second);
      if (bytes.size() == ch.size()) {
        ids.insert(ids.end(), bytes.begin(), bytes.end());
        last_unk = false;
        continue;
      }
    }
    if (unk_id_ < 0) continue;
    if (!(last_unk && fuse_unk_)) ids.push_back(unk_id_);
    last_unk = true;
  }
}

// Repeatedly merges the pair of lowest rank, the leftmost on a tie, over a linked list of
// symbols; queue entries made stale by an earlier merge are recognised and dropped.
void bpe_model::apply_merges(std::vector<int32_t>& ids) const {
  const auto n = static_cast<int32_t>(ids.size());
  std::vector<int32_t> prev(ids.size()), next(ids.size());
  std::vector<bool> alive(ids.size(), true);
  for (int32_t i = 0; i < n; ++i) {
    prev[static_cast<size_t>(i)] = i - 1;
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  using entry = std::tuple<int32_t, int32_t, int32_t>; // rank, position, result
  std::priority_queue<entry, std::vector<entry>, std::greater<>> queue;
  auto offer = [&](int32_t pos) {
    if (pos < 0) return;
    const auto nx = next[static_cast<size_t>(pos)];
    if (nx < 0) return;
    if (const auto* m = find_merge(ids[static_cast<size_t>(pos)], ids[static_cast<size_t>(nx)]))
      queue.emplace(m->rank, pos, m->result);
  };
  for (int32_t i = 0; i < n; ++i)
    offer(i);
  while (!queue.empty()) {
    const auto [rank, pos, result] = queue.top();
    queue.pop();
    const auto p = static_cast<size_t>(pos);
    if (!alive[p] || next[p] < 0) continue;
    const auto right = static_cast<size_t>(next[p]);
    const auto* m = find_merge(ids[p], ids[right]);
    if (m == nullptr || m->rank != rank || m->result != result) continue;
    ids[p] = result;
    alive[right] = false;
    next[p] = next[right];
    if (next[p] >= 0) prev[static_cast<size_t>(next[p])] = pos;
    offer(prev[p]);
    offer(pos);
  }
  size_t w = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    if (alive[i]) ids[w++] = ids[i];
  ids.resize(w);
}

void bpe_model::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_)
    if (const auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  std::vector<int32_t> ids;
  symbols_of(word, ids);
  apply_merges(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

} // namespace kvactor::tokenizer_parts
