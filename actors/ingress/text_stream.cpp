#include "actors/ingress/text_stream.hpp"

#include <algorithm>

namespace kvactor::openai {

text_stream::text_stream(const tokenizer& tok, std::vector<std::string> stop,
                         bool skip_special_tokens)
    : decoder_(tok, skip_special_tokens) {
  for (auto& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
}

size_t text_stream::pending_stop_prefix() const {
  size_t longest = 0;
  for (const auto& s : stop_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > longest; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        longest = k;
        break;
      }
  return longest;
}

expected<text_stream::delta> text_stream::push(int32_t token) {
  if (stopped_) return make_error(errc::invalid_argument, "text_stream: a token after the stop");
  auto piece = decoder_.push(token);
  if (!piece) return piece.err();
  held_ += *piece;
  delta out;
  // The earliest match of any stop string ends the text (a match starts in held_: nothing that
  // could begin one was sent).
  size_t at = std::string::npos;
  for (const auto& s : stop_) {
    const size_t p = held_.find(s);
    if (p < at || (p == at && p != std::string::npos && s.size() > out.stop.size())) {
      at = p;
      out.stop = s;
    }
  }
  if (at != std::string::npos) {
    out.text = held_.substr(0, at);
    out.stopped = stopped_ = true;
    held_.clear();
  } else {
    const size_t keep = pending_stop_prefix();
    out.text = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
  }
  sent_ += out.text;
  return out;
}

expected<std::string> text_stream::finish() {
  if (stopped_) return std::string{};
  auto rest = decoder_.finish();
  if (!rest) return rest.err();
  std::string out = held_ + *rest;
  held_.clear();
  // A stop string may complete only with the last bytes the decoder held.
  for (const auto& s : stop_)
    if (const size_t p = out.find(s); p != std::string::npos) {
      out.resize(p);
      stopped_ = true;
    }
  sent_ += out;
  return out;
}

} // namespace kvactor::openai
