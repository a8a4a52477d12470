// Streaming text: one token at a time, no delta ever carries a U+FFFD that the final text lacks
// (multi-byte characters span several byte-level tokens), and the deltas add up to the whole.
#include "quench/tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "quench/tokenizer/tiny_tokenizer.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

TEST(IncrementalDetokenizer, HoldsBackIncompleteCharactersAndAddsUpToTheWhole) {
  const Tokenizer t = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  const std::string text = "emoji 👍🏽 and 日本語, then ascii";
  const std::vector<int32_t> ids = t.encode(text, false);
  IncrementalDetokenizer detok(t);
  std::string streamed;
  int held = 0;
  for (int32_t id : ids) {
    const std::string delta = detok.push({id});
    if (delta.empty()) ++held;
    EXPECT_EQ(delta.find("\xEF\xBF\xBD"), std::string::npos) << "after id " << id;
    streamed += delta;
  }
  streamed += detok.finish();
  EXPECT_EQ(streamed, text);
  EXPECT_GT(held, 0);  // some tokens were mid-character
  // A sequence that really ends mid-character gets its U+FFFD at the end, from finish().
  IncrementalDetokenizer cut(t);
  const std::vector<int32_t> emoji = t.encode("👍", false);
  ASSERT_GT(emoji.size(), 1u);
  EXPECT_EQ(cut.push({emoji[0]}), "");
  EXPECT_EQ(cut.finish(), "\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, AnyTokenSequenceGivesTheTextOfDecodingItAtOnce) {
  // Random ids (byte tokens that make invalid UTF-8, merges, specials, ids past the vocabulary),
  // pushed in random chunks: the deltas always add up to decode() of all of them.
  const Tokenizer t = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(0, 520), chunk(1, 4);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(static_cast<size_t>(1 + trial % 40));
    for (int32_t& v : ids)
      v = id(rng);
    IncrementalDetokenizer detok(t);
    std::string streamed;
    for (size_t i = 0; i < ids.size();) {
      const size_t n = std::min(ids.size() - i, static_cast<size_t>(chunk(rng)));
      streamed +=
          detok.push(std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(i),
                                          ids.begin() + static_cast<std::ptrdiff_t>(i + n)));
      i += n;
      EXPECT_EQ(detok.settled_text(), streamed);
    }
    streamed += detok.finish();
    ASSERT_EQ(streamed, t.decode(ids, true, true)) << "trial " << trial;
  }
}

TEST(Utf8, SettledPrefixStopsOnlyBeforeACompletableTail) {
  EXPECT_EQ(utf8_settled_prefix("abc"), 3u);
  EXPECT_EQ(utf8_settled_prefix("ab\xE6\x97"), 2u);  // a 3-byte character cut short
  EXPECT_EQ(utf8_settled_prefix("ab\xF0"), 2u);      // a lead byte alone
  EXPECT_EQ(utf8_settled_prefix("ab\xE6\x41"), 4u);  // broken: settled as U+FFFD + 'A'
  EXPECT_EQ(utf8_settled_prefix("\x80\x80"), 2u);    // stray continuations: settled
  EXPECT_EQ(utf8_settled_prefix("x\xC0"), 2u);       // never valid as a lead
}

}  // namespace
}  // namespace quench
