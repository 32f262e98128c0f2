// One choice's text as its tokens arrive (pure: no CAF, no I/O). Each push() returns the text
// that may be sent now: never part of a UTF-8 character, never a piece that may still turn out to
// begin a stop string. A stop string ends the text before it, trimmed as vLLM trims it; the
// deltas concatenate to the whole text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "messages/errc.hpp"
#include "model/tokenizer.hpp"

namespace kvactor::openai {

class text_stream {
public:
  /// `tok` must outlive the stream. Empty strings in `stop` are ignored.
  text_stream(const tokenizer& tok, std::vector<std::string> stop, bool skip_special_tokens);

  struct delta {
    std::string text;     // to send now (may be empty)
    bool stopped = false; // a stop string matched: the text ends here
    std::string stop;     // the one that matched
  };

  /// The next token. After a stop, nothing more is taken (errc::invalid_argument).
  expected<delta> push(int32_t token);

  /// The end of the tokens: what was held back for a stop string that can no longer complete.
  expected<std::string> finish();

  /// Everything sent so far.
  const std::string& text() const { return sent_; }
  bool stopped() const { return stopped_; }

private:
  // The longest tail of held_ that begins some stop string.
  size_t pending_stop_prefix() const;

  incremental_decoder decoder_;
  std::vector<std::string> stop_;
  std::string held_; // decoded, not sent
  std::string sent_;
  bool stopped_ = false;
};

} // namespace kvactor::openai
