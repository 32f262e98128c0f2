#include "model/jinja/lexer.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace kvactor::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Jinja2 reads "\r\n" and "\r" as "\n" and, without keep_trailing_newline, drops one final "\n".
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class lexer {
public:
  explicit lexer(std::string source) : src_(std::move(source)) {}

  expected<std::vector<token>> run() {
    while (pos_ < src_.size()) {
      if (auto err = next_tag(); !err.empty())
        return make_error(errc::parse_error, fmt::format("line {}: {}", line_, err));
    }
    tokens_.push_back({token_kind::end, "", line_at(src_.size())});
    return std::move(tokens_);
  }

private:
  // One stretch of text and the tag after it; an error message, or "" on success.
  std::string next_tag() {
    size_t start = find_tag_start();
    std::string text = src_.substr(pos_, start - pos_);
    if (start == src_.size()) {
      emit_text(std::move(text));
      pos_ = start;
      return "";
    }
    char type = src_[start + 1];
    char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
    strip_before_tag(text, type, sign);
    emit_text(std::move(text));
    line_ = line_at(start);
    pos_ = start + 2 + (sign == '-' || sign == '+' ? 1 : 0);
    if (type == '#') return skip_comment();
    return lex_tag(type);
  }

  size_t find_tag_start() const {
    for (size_t i = pos_; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  // '-' strips all whitespace before the tag; lstrip_blocks strips a line's indentation before a
  // block or comment tag that starts the line.
  void strip_before_tag(std::string& text, char type, char sign) const {
    if (sign == '-') {
      while (!text.empty() && is_space(text.back()))
        text.pop_back();
      return;
    }
    if (sign == '+' || type == '{') return;
    size_t line_start = text.rfind('\n');
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    if (line_start == 0 && !line_starting_) return;
    if (line_start == text.size()) return;
    if (std::all_of(text.begin() + line_start, text.end(), is_space)) text.resize(line_start);
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({token_kind::text, std::move(text), line_});
  }

  int line_at(size_t offset) {
    line_ += static_cast<int>(std::count(src_.begin() + counted_, src_.begin() + offset, '\n'));
    counted_ = offset;
    return line_;
  }

  // After a closing delimiter: '-' eats following whitespace, trim_blocks one newline ('+' none).
  void after_close(size_t close_end, char sign) {
    size_t end = close_end;
    if (sign == '-') {
      while (end < src_.size() && is_space(src_[end]))
        ++end;
    } else if (sign != '+' && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
  }

  std::string skip_comment() {
    size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) return "unterminated comment: missing '#}'";
    char sign = close > pos_ ? src_[close - 1] : '\0';
    after_close(close + 2, sign == '-' || sign == '+' ? sign : '\0');
    return "";
  }

  std::string lex_tag(char type) {
    bool output = type == '{';
    tokens_.push_back({output ? token_kind::output_open : token_kind::block_open, "", line_});
    const char* close = output ? "}}" : "%}";
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_]))
        ++pos_;
      if (pos_ >= src_.size())
        return fmt::format("unterminated '{}': missing '{}'", output ? "{{" : "{%", close);
      line_at(pos_);
      if (depth == 0 && closes_here(close)) break;
      if (auto err = lex_token(depth); !err.empty()) return err;
    }
    char sign = src_[pos_] == '-' || src_[pos_] == '+' ? src_[pos_] : '\0';
    tokens_.push_back({output ? token_kind::output_close : token_kind::block_close, "", line_});
    size_t close_end = pos_ + 2 + (sign ? 1 : 0);
    // trim_blocks and lstrip_blocks apply to blocks; after '}}' only '-' strips.
    if (output && sign != '-') {
      line_starting_ = false;
      pos_ = close_end;
      return "";
    }
    after_close(close_end, sign);
    return "";
  }

  bool closes_here(const char* close) const {
    size_t p = pos_;
    if (src_[p] == '-' || src_[p] == '+') ++p;
    return src_.compare(p, 2, close) == 0;
  }

  std::string lex_token(int& depth) {
    char c = src_[pos_];
    if (is_name_start(c)) return lex_name();
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number();
    if (c == '\'' || c == '"') return lex_string();
    return lex_operator(depth);
  }

  std::string lex_name() {
    size_t start = pos_;
    while (pos_ < src_.size() && is_name_char(src_[pos_]))
      ++pos_;
    tokens_.push_back({token_kind::name, src_.substr(start, pos_ - start), line_});
    return "";
  }

  size_t digits_end(size_t p) const {
    while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_'))
      ++p;
    return p;
  }

  std::string lex_number() {
    size_t start = pos_;
    size_t end = digits_end(pos_);
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.'
        && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      end = digits_end(end + 1);
      is_float = true;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t p = end + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        end = digits_end(p);
        is_float = true;
      }
    }
    std::string digits;
    for (size_t i = start; i < end; ++i)
      if (src_[i] != '_') digits += src_[i];
    pos_ = end;
    tokens_.push_back({is_float ? token_kind::floating : token_kind::integer, digits, line_});
    return "";
  }

  // Python's string escapes (Jinja2 decodes literals with 'unicode-escape').
  std::string lex_string() {
    char quote = src_[pos_++];
    std::string out;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      char c = src_[pos_++];
      if (c != '\\' || pos_ >= src_.size()) {
        out += c;
        continue;
      }
      if (auto err = unescape(out); !err.empty()) return err;
    }
    if (pos_ >= src_.size()) return "unterminated string literal";
    ++pos_;
    tokens_.push_back({token_kind::string, std::move(out), line_});
    return "";
  }

  std::string unescape(std::string& out) {
    char e = src_[pos_++];
    switch (e) {
    case 'n': out += '\n'; return "";
    case 't': out += '\t'; return "";
    case 'r': out += '\r'; return "";
    case '\\': out += '\\'; return "";
    case '\'': out += '\''; return "";
    case '"': out += '"'; return "";
    case 'a': out += '\a'; return "";
    case 'b': out += '\b'; return "";
    case 'f': out += '\f'; return "";
    case 'v': out += '\v'; return "";
    case '\n': return "";
    case 'x': return unescape_hex(out, 2);
    case 'u': return unescape_hex(out, 4);
    case 'U': return unescape_hex(out, 8);
    default: break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t cp = static_cast<uint32_t>(e - '0');
      for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i)
        cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
      append_utf8(out, cp);
      return "";
    }
    out += '\\';
    out += e;
    return "";
  }

  std::string unescape_hex(std::string& out, int digits) {
    if (pos_ + static_cast<size_t>(digits) > src_.size()) return "truncated escape in string";
    uint32_t cp = 0;
    for (int i = 0; i < digits; ++i) {
      char h = src_[pos_++];
      if (!std::isxdigit(static_cast<unsigned char>(h))) return "bad escape in string";
      cp = cp * 16
           + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                       ? h - '0'
                                       : (std::tolower(h) - 'a' + 10));
    }
    if (cp > 0x10ffff) return "escape out of the Unicode range in string";
    append_utf8(out, cp);
    return "";
  }

  std::string lex_operator(int& depth) {
    static const char* const two_char[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two_char) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({token_kind::op, op, line_});
        pos_ += 2;
        return "";
      }
    }
    char c = src_[pos_];
    if (!std::strchr("+-*/%~<>=()[]{},.:|", c)) return fmt::format("unexpected character '{}'", c);
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) return fmt::format("unexpected '{}'", c);
      --depth;
    }
    tokens_.push_back({token_kind::op, std::string(1, c), line_});
    ++pos_;
    return "";
  }

  std::string src_;
  size_t pos_ = 0;
  size_t counted_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<token> tokens_;
};

} // namespace

expected<std::vector<token>> lex(std::string_view source) {
  return lexer(normalize_newlines(source)).run();
}

} // namespace kvactor::jinja
