// A choice's text as its tokens arrive: deltas that concatenate to the decoded text, never split
// a UTF-8 character, hold back what may begin a stop string, and end before the first stop string
// (trimmed, as vLLM trims it), on a real byte-level BPE tokenizer.
#include "actors/ingress/text_stream.hpp"

#include <gtest/gtest.h>

#include "tests/ingress/llama3_tokenizer.hpp"

#include <string>
#include <vector>

namespace kvactor::openai {
namespace {

using test::llama3;

std::vector<int32_t> ids_of(const std::string& text) {
  auto ids = llama3().encode(text, false);
  EXPECT_TRUE(ids);
  return ids ? *ids : std::vector<int32_t>{};
}

// Every delta of `text`'s tokens streamed with `stop`, then what finish() gave.
struct streamed {
  std::vector<std::string> deltas;
  std::string text;
  bool stopped = false;
};

streamed stream(const std::string& text, std::vector<std::string> stop) {
  text_stream s(llama3(), std::move(stop), true);
  streamed out;
  for (int32_t id : ids_of(text)) {
    auto d = s.push(id);
    EXPECT_TRUE(d);
    out.deltas.push_back(d->text);
    out.text += d->text;
    if (d->stopped) {
      out.stopped = true;
      return out;
    }
  }
  auto rest = s.finish();
  EXPECT_TRUE(rest);
  out.text += *rest;
  out.stopped = s.stopped();
  return out;
}

bool valid_utf8(const std::string& s) {
  return utf8_invalid_at(s) == std::string::npos;
}

TEST(TextStream, DeltasConcatenateToTheTextAndNeverSplitACharacter) {
  const std::string text = "Grüße, naïve café 🙂😀 中文测试：你好，世界！";
  const auto got = stream(text, {});
  EXPECT_EQ(got.text, text);
  EXPECT_FALSE(got.stopped);
  for (const auto& d : got.deltas)
    EXPECT_TRUE(valid_utf8(d)) << "a delta split a character: " << d;
}

TEST(TextStream, AStopStringEndsTheTextBeforeItAndIsTrimmed) {
  const auto got = stream("Hello, world! How's it going?", {"world"});
  EXPECT_TRUE(got.stopped);
  EXPECT_EQ(got.text, "Hello, ");
}

TEST(TextStream, AStopStringSpanningTokensIsFoundAndNothingOfItWasSent) {
  // " its answer" arrives as " its", " answer": "ts an" spans both.
  const auto got = stream("The model ends its answer here.", {"ts an"});
  EXPECT_TRUE(got.stopped);
  EXPECT_EQ(got.text, "The model ends i");
}

TEST(TextStream, WhatMayBeginAStopStringIsHeldUntilItCannot) {
  text_stream s(llama3(), {"Hello there"}, true);
  const auto ids = ids_of("Hello world");
  ASSERT_EQ(ids.size(), 2u);
  auto first = s.push(ids[0]);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->text, "") << "\"Hello\" may begin the stop string: held";
  auto second = s.push(ids[1]);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->text, "Hello world") << "\" world\" cannot continue it: all sent";
  EXPECT_FALSE(second->stopped);
}

TEST(TextStream, TheEarliestOfSeveralStopStringsWins) {
  const auto got = stream("Hello, world! How's it going?", {"going", "How", "world!"});
  EXPECT_EQ(got.text, "Hello, ");
}

TEST(TextStream, HeldTextIsSentAtTheEndWhenNoStopStringCompleted) {
  const auto got = stream("The model ends", {"ends here"});
  EXPECT_FALSE(got.stopped);
  EXPECT_EQ(got.text, "The model ends");
}

TEST(TextStream, SpecialTokensAreSkippedUnlessAsked) {
  const std::vector<int32_t> ids = {343, 498, 339}; // Hello<|eot_id|> world
  text_stream skip(llama3(), {}, true), keep(llama3(), {}, false);
  std::string a, b;
  for (int32_t id : ids) {
    a += skip.push(id)->text;
    b += keep.push(id)->text;
  }
  a += *skip.finish();
  b += *keep.finish();
  EXPECT_EQ(a, "Hello world");
  EXPECT_EQ(b, "Hello<|eot_id|> world");
}

TEST(TextStream, ATokenAfterTheStopOrOutsideTheVocabularyIsAnError) {
  text_stream s(llama3(), {"Hello"}, true);
  auto d = s.push(343);
  ASSERT_TRUE(d && d->stopped);
  EXPECT_FALSE(s.push(339));
  text_stream t(llama3(), {}, true);
  EXPECT_FALSE(t.push(1'000'000));
}

} // namespace
} // namespace kvactor::openai
