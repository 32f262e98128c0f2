// Pre-tokenizer steps of a tokenizer.json (Split on a regex or a string, ByteLevel), the
// byte-level alphabet, and the NFC normalizer.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "model/tokenizer_parts.hpp"

namespace kvactor::tokenizer_parts {

namespace {

using nlohmann::json;

error refused(const std::string& field, const std::string& why) {
  return make_error(errc::unsupported, fmt::format("{}: {}", field, why));
}

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string{};
}

bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

expected<pre_step> parse_split(const json& j, const std::string& field) {
  if (flag(j, "invert", false)) return refused(field, "Split with invert: true is not supported");
  const auto behavior = j.value("behavior", std::string("Isolated"));
  if (behavior != "Isolated" && behavior != "Removed")
    return refused(field, fmt::format("Split behavior '{}' is not supported (kvactor splits "
                                      "Isolated and Removed)",
                                      behavior));
  const auto& p = j.contains("pattern") ? j["pattern"] : json();
  const bool literal = p.is_object() && p.contains("String") && p["String"].is_string();
  if (!literal && !(p.is_object() && p.contains("Regex") && p["Regex"].is_string()))
    return make_error(errc::parse_error,
                      fmt::format("{}.pattern: {} is not {{\"Regex\": ...}} or {{\"String\": ...}}",
                                  field, p.dump()));
  auto re = regex::compile(p[literal ? "String" : "Regex"].get<std::string>(), literal);
  if (!re) return make_error(re.err().code, fmt::format("{}.pattern: {}", field, re.err().message));
  return pre_step{pre_step::kind::split, *re, behavior == "Removed", false};
}

expected<pre_step> parse_byte_level(const json& j, const std::string& field) {
  pre_step s{pre_step::kind::byte_level, nullptr, false, flag(j, "add_prefix_space", false)};
  if (flag(j, "use_regex", true)) {
    auto re = regex::compile(gpt2_pattern, false);
    if (!re) return make_error(re.err().code, fmt::format("{}: {}", field, re.err().message));
    s.pattern = *re;
  }
  return s;
}

// The pieces of `text` a pattern leaves: matches and the stretches between them (Isolated), or
// the stretches alone (Removed).
status split_into(const pre_step& s, const std::string& text, std::vector<std::string>& out) {
  auto found = s.pattern->matches(text);
  if (!found) return found.err();
  size_t at = 0;
  for (const auto& [b, e] : *found) {
    if (b > at) out.push_back(text.substr(at, b - at));
    if (!s.remove_matches && e > b) out.push_back(text.substr(b, e - b));
    at = e;
  }
  if (at < text.size()) out.push_back(text.substr(at));
  return ok();
}

} // namespace

expected<std::shared_ptr<const regex>> regex::compile(const std::string& pattern, bool literal) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0u);
  auto* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                          &code, &offset, nullptr);
  if (c == nullptr) {
    std::array<PCRE2_UCHAR, 256> why{};
    pcre2_get_error_message(code, why.data(), why.size());
    return make_error(errc::parse_error,
                      fmt::format("regex '{}' does not compile at offset {}: {}", pattern, offset,
                                  reinterpret_cast<const char*>(why.data())));
  }
  pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); // an optimisation: without JIT it still matches
  std::shared_ptr<regex> r(new regex());
  r->code_ = c;
  return std::shared_ptr<const regex>(std::move(r));
}

regex::~regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

expected<std::vector<std::pair<size_t, size_t>>> regex::matches(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  auto* data = pcre2_match_data_create_from_pattern(code, nullptr);
  size_t at = 0;
  while (at <= text.size()) {
    // The text was checked as UTF-8 once, before any step.
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), at,
                               PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(data);
      std::array<PCRE2_UCHAR, 256> why{};
      pcre2_get_error_message(rc, why.data(), why.size());
      return make_error(errc::invalid_argument,
                        fmt::format("pre_tokenizer: the regex failed at byte {} of a {}-byte "
                                    "piece: {}",
                                    at, text.size(), reinterpret_cast<const char*>(why.data())));
    }
    const auto* v = pcre2_get_ovector_pointer(data);
    const size_t b = v[0], e = v[1];
    if (e == b) { // an empty match: step over one character so the loop advances
      at = b + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80)
        ++at;
      continue;
    }
    out.emplace_back(b, e);
    at = e;
  }
  pcre2_match_data_free(data);
  return out;
}

expected<std::vector<pre_step>> parse_pre_tokenizer(const json& j, const std::string& field) {
  if (j.is_null()) return std::vector<pre_step>{};
  const auto type = type_of(j);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return make_error(errc::parse_error, fmt::format("{}.pretokenizers: missing", field));
    std::vector<pre_step> steps;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      auto inner =
          parse_pre_tokenizer(j["pretokenizers"][i], fmt::format("{}.pretokenizers[{}]", field, i));
      if (!inner) return inner.err();
      steps.insert(steps.end(), inner->begin(), inner->end());
    }
    return steps;
  }
  expected<pre_step> step =
      type == "Split" ? parse_split(j, field)
      : type == "ByteLevel"
          ? parse_byte_level(j, field)
          : expected<pre_step>(refused(field, fmt::format("type '{}' is not supported "
                                                          "(kvactor reads ByteLevel, "
                                                          "Split and Sequence)",
                                                          type)));
  if (!step) return step.err();
  return std::vector<pre_step>{*step};
}

expected<std::vector<std::string>> pre_tokenize(const std::vector<pre_step>& steps,
                                                std::string text) {
  std::vector<std::string> pieces{std::move(text)};
  for (const auto& s : steps) {
    std::vector<std::string> next;
    for (auto& p : pieces) {
      if (s.what == pre_step::kind::byte_level && s.add_prefix_space && !p.starts_with(' '))
        p.insert(p.begin(), ' ');
      if (s.pattern) {
        if (auto ok = split_into(s, p, next); !ok) return ok.err();
      } else if (!p.empty())
        next.push_back(std::move(p));
    }
    if (s.what == pre_step::kind::byte_level)
      for (auto& p : next)
        p = to_byte_level(p);
    pieces = std::move(next);
  }
  return pieces;
}

const std::array<std::string, 256>& byte_to_unicode() {
  // GPT-2's table: printable Latin-1 bytes stand for themselves, the others for U+0100 onwards
  // in byte order, so every byte is a visible character and a token is a printable string.
  static const auto table = [] {
    std::array<std::string, 256> t;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : next++;
      icu::UnicodeString(static_cast<UChar32>(cp)).toUTF8String(t[static_cast<size_t>(b)]);
    }
    return t;
  }();
  return table;
}

const std::unordered_map<std::string, uint8_t>& unicode_to_byte() {
  static const auto table = [] {
    std::unordered_map<std::string, uint8_t> t;
    for (int b = 0; b < 256; ++b)
      t.emplace(byte_to_unicode()[static_cast<size_t>(b)], static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes)
    out += byte_to_unicode()[static_cast<unsigned char>(c)];
  return out;
}

expected<std::string> nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const auto* n = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status))
    return make_error(errc::unsupported,
                      fmt::format("normalizer NFC: ICU has no NFC data ({})", u_errorName(status)));
  const auto in = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (n->isNormalized(in, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  const auto normalized = n->normalize(in, status);
  if (U_FAILURE(status))
    return make_error(errc::invalid_argument,
                      fmt::format("normalizer NFC failed: {}", u_errorName(status)));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80)
      ++n;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

} // namespace kvactor::tokenizer_parts
