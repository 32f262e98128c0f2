// The tokenizers against Hugging Face: every golden string of tests/data/tokenizers/goldens.json
// (made by make_goldens.py with the `tokenizers` library: Unicode in several scripts, combining
// marks, whitespace runs, digits, contractions, emoji, special tokens inside text, the empty
// string) encodes to HF's ids and decodes to HF's text, streamed decoding never cuts a character,
// and bad files or ids are errors that name the file, the field and the value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/tokenizer.hpp"
#include "tests/support/temp_dir.hpp"

namespace kvactor::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

std::string source(const std::string& rel) {
  return std::string(KVACTOR_SOURCE_DIR) + "/" + rel;
}

const json& goldens() {
  static const json g = [] {
    std::ifstream in(source("tests/data/tokenizers/goldens.json"));
    return json::parse(in);
  }();
  return g;
}

std::unique_ptr<tokenizer> load_golden(const std::string& name) {
  auto t = load_tokenizer(source(goldens()["tokenizers"][name]["dir"].get<std::string>()));
  EXPECT_TRUE(t) << name << ": " << (t ? "" : t.err().message);
  return t ? std::move(*t) : nullptr;
}

std::string show(const std::string& s) {
  return json(s).dump();
}

class TokenizerGoldens : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGoldens, EveryStringEncodesToHuggingFaceIdsAndDecodesBack) {
  const auto tok = load_golden(GetParam());
  ASSERT_TRUE(tok);
  for (const auto& c : goldens()["tokenizers"][GetParam()]["cases"]) {
    const auto text = c["text"].get<std::string>();
    const auto with = c["ids_with_special"].get<std::vector<int32_t>>();
    const auto plain = c["ids"].get<std::vector<int32_t>>();
    auto got = tok->encode(text, true);
    ASSERT_TRUE(got) << got.err().message;
    EXPECT_EQ(*got, with) << "add_special_tokens=true: " << show(text);
    got = tok->encode(text, false);
    ASSERT_TRUE(got) << got.err().message;
    EXPECT_EQ(*got, plain) << "add_special_tokens=false: " << show(text);
    auto back = tok->decode(with, false);
    ASSERT_TRUE(back) << back.err().message;
    EXPECT_EQ(*back, c["decoded"].get<std::string>()) << show(text);
    back = tok->decode(with, true);
    ASSERT_TRUE(back) << back.err().message;
    EXPECT_EQ(*back, c["decoded_skip_special"].get<std::string>()) << show(text);
    for (size_t i = 0; i < plain.size(); ++i) {
      auto one = tok->decode(std::vector<int32_t>{plain[i]}, false);
      ASSERT_TRUE(one);
      EXPECT_EQ(*one, c["decoded_each"][i].get<std::string>())
          << "id " << plain[i] << " alone, of " << show(text);
    }
  }
}

bool has_replacement(const std::string& s) {
  return s.find("\xEF\xBF\xBD") != std::string::npos;
}

TEST_P(TokenizerGoldens, StreamingNeverCutsACharacterAndAddsUpToTheFullDecode) {
  const auto tok = load_golden(GetParam());
  ASSERT_TRUE(tok);
  int held = 0, cut = 0; // tokens ending inside a character: held back, and in the goldens
  for (const auto& c : goldens()["tokenizers"][GetParam()]["cases"]) {
    const auto ids = c["ids_with_special"].get<std::vector<int32_t>>();
    for (const auto& each : c["decoded_each"])
      cut += has_replacement(each.get<std::string>());
    for (const bool skip : {false, true}) {
      const auto full = *tok->decode(ids, skip);
      incremental_decoder stream(*tok, skip);
      std::string joined;
      for (const auto id : ids) {
        auto piece = stream.push(id);
        ASSERT_TRUE(piece) << piece.err().message;
        EXPECT_EQ(utf8_invalid_at(*piece), std::string::npos) << show(*piece);
        // (a fixture tokenizer drops bytes outside its alphabet: its text has U+FFFD of its own)
        if (!has_replacement(full))
          EXPECT_FALSE(has_replacement(*piece)) << "a partial character in " << show(*piece);
        held += piece->empty() && has_replacement(*tok->decode(std::vector<int32_t>{id}, false));
        joined += *piece;
      }
      auto rest = stream.finish();
      ASSERT_TRUE(rest) << rest.err().message;
      joined += *rest;
      EXPECT_EQ(joined, full) << show(c["text"].get<std::string>());
    }
  }
  if (cut > 0) EXPECT_GT(held, 0) << "characters split across tokens were held back";
}

INSTANTIATE_TEST_SUITE_P(HuggingFace, TokenizerGoldens,
                         ::testing::Values("llama3_bpe", "gpt2_bpe", "qwen2_bpe", "qwen2_fixture",
                                           "spm_unigram", "mistral_fixture"),
                         [](const auto& info) { return info.param; });

TEST(Tokenizer, TheFixtureTokenizersFitTheFixtureModelsVocabulary) {
  for (const char* family : {"mistral", "qwen2"}) {
    auto t = load_tokenizer(source("tests/data/transformers/") + family);
    ASSERT_TRUE(t) << t.err().message;
    EXPECT_LE((*t)->vocab_size(), 256) << family;
    auto ids = (*t)->encode("Hello world", false);
    ASSERT_TRUE(ids);
    EXPECT_EQ(*(*t)->decode(*ids, false), "Hello world") << family;
  }
}

TEST(Tokenizer, ALlama3TemplateAddsBeginOfTextOnlyWithSpecialTokens) {
  const auto tok = load_golden("llama3_bpe");
  const auto with = tok->encode("Hi", true);
  const auto without = tok->encode("Hi", false);
  ASSERT_TRUE(with && without);
  ASSERT_EQ(with->size(), without->size() + 1);
  EXPECT_EQ(*tok->decode(std::vector<int32_t>{with->front()}, false), "<|begin_of_text|>");
}

TEST(TokenizerErrors, ADirectoryWithoutTokenizerNamesTheFilesLookedFor) {
  temp_dir d("kvactor-tok");
  auto t = load_tokenizer(d.path.string());
  ASSERT_FALSE(t);
  EXPECT_EQ(t.err().code, errc::io_error);
  EXPECT_THAT(t.err().message, HasSubstr("looked for tokenizer.json and tokenizer.model"));
}

TEST(TokenizerErrors, MalformedJsonNamesTheFile) {
  temp_dir d("kvactor-tok");
  d.write("tokenizer.json", "{\"model\": ");
  auto t = load_tokenizer(d.path.string());
  ASSERT_FALSE(t);
  EXPECT_EQ(t.err().code, errc::parse_error);
  EXPECT_THAT(t.err().message, HasSubstr(d.file("tokenizer.json") + ": not JSON"));
}

// A copy of llama3_bpe's tokenizer.json with one field changed.
std::string with_change(const std::string& pointer, const json& value) {
  std::ifstream in(source("tests/data/tokenizers/llama3_bpe/tokenizer.json"));
  auto j = json::parse(in);
  j[json::json_pointer(pointer)] = value;
  return j.dump();
}

std::string load_error(const std::string& tokenizer_json) {
  temp_dir d("kvactor-tok");
  d.write("tokenizer.json", tokenizer_json);
  auto t = load_tokenizer(d.path.string());
  return t ? std::string("loaded") : t.err().message;
}

TEST(TokenizerErrors, UnsupportedKindsAreRefusedByFieldAndType) {
  EXPECT_THAT(load_error(with_change("/model/type", "WordPiece")),
              HasSubstr("model.type: 'WordPiece' is not supported"));
  EXPECT_THAT(load_error(with_change("/normalizer", {{"type", "NFKC"}})),
              HasSubstr("normalizer: type 'NFKC' is not supported"));
  EXPECT_THAT(load_error(with_change("/pre_tokenizer/pretokenizers/0",
                                     {{"type", "Metaspace"}, {"replacement", "_"}})),
              HasSubstr("pre_tokenizer.pretokenizers[0]: type 'Metaspace' is not supported"));
  EXPECT_THAT(load_error(with_change("/pre_tokenizer/pretokenizers/0/behavior", "Contiguous")),
              HasSubstr("Split behavior 'Contiguous' is not supported"));
  EXPECT_THAT(load_error(with_change("/decoder", {{"type", "WordPiece"}})),
              HasSubstr("decoder: type 'WordPiece' is not supported"));
  EXPECT_THAT(load_error(with_change("/post_processor", {{"type", "BertProcessing"}})),
              HasSubstr("post_processor: type 'BertProcessing' is not supported"));
  EXPECT_THAT(load_error(with_change("/pre_tokenizer/pretokenizers/0/pattern/Regex", "(")),
              HasSubstr("pre_tokenizer.pretokenizers[0].pattern: regex '(' does not compile"));
}

TEST(TokenizerErrors, AMergeNamingATokenOutsideTheVocabularyNamesTheMergeAndToken) {
  EXPECT_THAT(load_error(with_change("/model/merges/3", json::array({"h", "zzz"}))),
              HasSubstr("model.merges[3]: [\"h\",\"zzz\"] names 'zzz', which is not in "
                        "model.vocab"));
  EXPECT_THAT(load_error(with_change("/model/merges/0", "no-space")),
              HasSubstr("model.merges[0]: \"no-space\" is not \"a b\" or [\"a\", \"b\"]"));
  EXPECT_THAT(load_error(with_change("/model/vocab/a", -4)),
              HasSubstr("model.vocab[\"a\"]: -4 is not a token id"));
}

TEST(TokenizerErrors, AnIdOutsideTheVocabularyNamesItsPositionAndValue) {
  for (const char* name : {"llama3_bpe", "spm_unigram"}) {
    const auto tok = load_golden(name);
    const std::vector<int32_t> ids = {5, tok->vocab_size(), 7};
    auto text = tok->decode(ids, false);
    ASSERT_FALSE(text) << name;
    EXPECT_THAT(text.err().message,
                HasSubstr("ids[1]: " + std::to_string(tok->vocab_size()) + " is not a token id"));
    incremental_decoder stream(*tok, false);
    EXPECT_FALSE(stream.push(-1)) << name;
  }
}

TEST(TokenizerErrors, TextThatIsNotUtf8IsRefusedWithTheByteOffset) {
  for (const char* name : {"gpt2_bpe", "spm_unigram"}) {
    auto ids = load_golden(name)->encode("ok\xC3(", false);
    ASSERT_FALSE(ids);
    EXPECT_THAT(ids.err().message, HasSubstr("invalid UTF-8 at byte 2"));
  }
}

TEST(SentencePiece, TokenizerConfigDecidesTheBosToken) {
  temp_dir d("kvactor-tok");
  fs::copy_file(source("tests/data/tokenizers/spm_unigram/tokenizer.model"),
                d.file("tokenizer.model"));
  auto with_bos = load_tokenizer(d.path.string()); // no config: the model's <s>
  ASSERT_TRUE(with_bos);
  EXPECT_EQ((*with_bos)->encode("Hello", true)->front(), 1);
  d.write("tokenizer_config.json", R"({"add_bos_token": false, "add_eos_token": true})");
  auto t = load_tokenizer(d.path.string());
  ASSERT_TRUE(t) << t.err().message;
  auto ids = *(*t)->encode("Hello", false);
  ids.push_back(2); // </s>
  EXPECT_EQ(*(*t)->encode("Hello", true), ids);
  d.write("tokenizer_config.json", R"({"add_bos_token": "yes"})");
  t = load_tokenizer(d.path.string());
  ASSERT_FALSE(t);
  EXPECT_THAT(t.err().message, HasSubstr("add_bos_token: \"yes\" is not true or false"));
}

TEST(SentencePiece, AGarbageModelIsAnErrorNamingTheFile) {
  temp_dir d("kvactor-tok");
  d.write("tokenizer.model", "not a protobuf at all");
  auto t = load_tokenizer(d.path.string());
  ASSERT_FALSE(t);
  EXPECT_THAT(t.err().message, HasSubstr(d.file("tokenizer.model") + ": not a SentencePiece"));
}

TEST(SentencePiece, IsUsedWhenTokenizerJsonIsOfAKindKvactorDoesNotRead) {
  temp_dir d("kvactor-tok");
  fs::copy_file(source("tests/data/tokenizers/spm_unigram/tokenizer.model"),
                d.file("tokenizer.model"));
  d.write("tokenizer.json", with_change("/model/type", "Unigram"));
  auto t = load_tokenizer(d.path.string());
  ASSERT_TRUE(t) << t.err().message;
  EXPECT_THAT((*t)->describe(), HasSubstr("SentencePiece"));
}

TEST(Utf8, LossyDecodingReplacesEachMaximalInvalidSubpart) {
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x99" // a 4-byte character cut after 3 bytes
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(utf8_lossy("\xFF\xC3"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") << "surrogate";
  EXPECT_EQ(utf8_invalid_at("ok\xE2\x82"), 2u);
  EXPECT_EQ(utf8_invalid_at("\xE2\x82\xAC"), std::string::npos);
}

} // namespace
} // namespace kvactor::test
