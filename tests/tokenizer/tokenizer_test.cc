// The tokenizer against HuggingFace `tokenizers`: for three byte-level BPE styles (Llama-3's
// split regex with ignore_merges and a BOS template, Qwen2's NFC and single-digit split, GPT-2's
// built-in regex), every fixture string encodes to HF's ids, with and without special tokens, and
// decodes to HF's text (tests/data/tokenizer, written by tools/make_tokenizer_fixtures.py).
// Then the pieces on their own: the byte-level alphabet, UTF-8 checks, merge order, and the
// errors for input and files quench cannot take.
#include "quench/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/expect_error.h"
#include "quench/tokenizer/byte_level.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

const std::string kData = QUENCH_TEST_DATA_DIR "/tokenizer/";

class TokenizerMatchesHf : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerMatchesHf, EveryFixtureEncodesAndDecodesAsHfDoes) {
  const std::string dir = kData + GetParam();
  const Tokenizer tokenizer = Tokenizer::from_file(dir + "/tokenizer.json");
  const nlohmann::json cases = nlohmann::json::parse(std::ifstream(dir + "/cases.json"));
  ASSERT_GT(cases.at("cases").size(), 30u);
  for (const auto& c : cases.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer.encode(text, true), ids) << "text: \"" << text << "\"";
    EXPECT_EQ(tokenizer.encode(text, false), c.at("ids_no_special").get<std::vector<int32_t>>())
        << "text: \"" << text << "\"";
    EXPECT_EQ(tokenizer.decode(ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(tokenizer.decode(ids, true), c.at("decoded_skip_special").get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Styles, TokenizerMatchesHf, ::testing::Values("llama3", "qwen2", "gpt2"));

TEST(Tokenizer, SpecialTokensAndVocabulary) {
  const Tokenizer t = Tokenizer::from_file(kData + "llama3/tokenizer.json");
  EXPECT_EQ(t.vocab_size(), 1500);
  ASSERT_TRUE(t.token_to_id("<|eot_id|>").has_value());
  const int32_t eot = *t.token_to_id("<|eot_id|>");
  EXPECT_TRUE(t.is_special(eot));
  EXPECT_EQ(t.id_to_token(eot), "<|eot_id|>");
  EXPECT_FALSE(t.token_to_id("no such token").has_value());
  EXPECT_EQ(t.id_to_token(99999), "");
}

TEST(ByteLevel, EveryByteHasItsOwnPrintableSymbol) {
  std::set<std::string> symbols;
  for (int b = 0; b < 256; ++b) {
    const std::string& s = byte_level_symbol(static_cast<uint8_t>(b));
    symbols.insert(s);
    const std::vector<uint32_t> cps = decode_utf8(s);
    ASSERT_EQ(cps.size(), 1u);
    EXPECT_EQ(byte_level_byte(cps[0]), static_cast<uint8_t>(b));
  }
  EXPECT_EQ(symbols.size(), 256u);
  EXPECT_EQ(byte_level_symbol(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(byte_level_symbol('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(byte_level_symbol('A'), "A");
  EXPECT_FALSE(byte_level_byte(0x20).has_value());  // a real space is no symbol
}

TEST(Utf8, InvalidSequencesAreFoundAndReplaced) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xF0\x9F\x91\x8D"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xC3"), 2u);                 // truncated
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);               // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);          // a surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);       // past U+10FFFF
  EXPECT_EQ(utf8_lossy("a\xF0\x9F\x91z"), "a\xEF\xBF\xBDz");  // one U+FFFD for the 3-byte prefix
  EXPECT_EQ(decode_utf8("\xE6\x97\xA5"), std::vector<uint32_t>{0x65E5});
}

TEST(BpeModel, LowestRankMergesFirstAndLeftmostAmongEquals) {
  // "abc": rank 0 is (b, c), so a + bc, even though (a, b) comes first in the word.
  const BpeModel model({{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}},
                       {{"b", "c"}, {"a", "b"}, {"a", "a"}}, false);
  std::vector<int32_t> ids;
  model.encode_word("abc", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 4}));  // a + bc: no merge makes abc from (a, bc)
  ids.clear();
  model.encode_word("aaa", ids);  // (a, a) at 0 first: aa + a
  EXPECT_EQ(ids, (std::vector<int32_t>{6, 0}));
  EXPECT_QUENCH_ERROR(BpeModel({{"a", 0}}, {{"a", "a"}}, false),
                      {"merge 0", "\"aa\"", "not in the vocabulary"});
  std::vector<int32_t> unknown;
  EXPECT_QUENCH_ERROR(model.encode_word("d", unknown), {"symbol \"d\"", "no id"});
}

TEST(Tokenizer, BadTextAndUnsupportedFilesNameTheProblem) {
  const Tokenizer t = Tokenizer::from_file(kData + "gpt2/tokenizer.json");
  EXPECT_QUENCH_ERROR(t.encode("ok\xFF"), {"not valid UTF-8", "byte 2"});
  const std::vector<int32_t> bad = {5, 70000};
  EXPECT_QUENCH_ERROR(t.decode(bad), {"id 70000", "not in the vocabulary"});
  EXPECT_EQ(t.decode(bad, false, true), t.decode(std::vector<int32_t>{5}));  // generated output
  const std::string minimal = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},)";
  EXPECT_QUENCH_ERROR(
      Tokenizer::from_json(minimal + R"("normalizer": {"type": "NFKC"}})", "t.json"),
      {"t.json", "normalizer \"NFKC\"", "NFC"});
  EXPECT_QUENCH_ERROR(
      Tokenizer::from_json(minimal + R"("pre_tokenizer": {"type": "Metaspace"}})", "t.json"),
      {"pre_tokenizer \"Metaspace\"", "Split, ByteLevel"});
  EXPECT_QUENCH_ERROR(
      Tokenizer::from_json(R"({"model": {"type": "Unigram", "vocab": []}})", "t.json"),
      {"model \"Unigram\"", "BPE"});
  EXPECT_QUENCH_ERROR(
      Tokenizer::from_json(
          minimal + R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(["},
                                         "behavior": "Isolated", "invert": false}})",
          "t.json"),
      {"does not compile"});
  EXPECT_QUENCH_ERROR(Tokenizer::from_json("{", "t.json"), {"t.json", "not valid JSON"});
  EXPECT_QUENCH_ERROR(Tokenizer::from_file(kData + "missing.json"), {"cannot open tokenizer"});
}

}  // namespace
}  // namespace quench
