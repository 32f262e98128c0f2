// Added tokens (special or not) are found literally in the text before any pre-tokenization, so
// "<|eot_id|>" inside a sentence is one id and never a run of punctuation pieces.
#include <algorithm>

#include "model/tokenizer_parts.hpp"

namespace kvactor::tokenizer_parts {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

} // namespace

added_matcher::added_matcher(std::vector<added_token> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (!tokens_[i].content.empty())
      by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

std::vector<segment> added_matcher::split(std::string_view text) const {
  std::vector<segment> out;
  size_t plain_from = 0; // where the current plain stretch starts
  size_t at = 0;
  auto flush = [&](size_t end) {
    if (end > plain_from) out.push_back({std::string(text.substr(plain_from, end - plain_from))});
  };
  while (at < text.size()) {
    const added_token* hit = nullptr;
    for (const auto i : by_first_byte_[static_cast<unsigned char>(text[at])])
      if (text.substr(at).starts_with(tokens_[i].content)) {
        hit = &tokens_[i];
        break; // the list is longest first
      }
    if (hit == nullptr) {
      ++at;
      continue;
    }
    size_t begin = at, end = at + hit->content.size();
    if (hit->lstrip)
      while (begin > plain_from && is_space(text[begin - 1]))
        --begin;
    if (hit->rstrip)
      while (end < text.size() && is_space(text[end]))
        ++end;
    flush(begin);
    out.push_back({std::string(text.substr(begin, end - begin)), hit->id});
    plain_from = at = end;
  }
  flush(text.size());
  return out;
}

} // namespace kvactor::tokenizer_parts
