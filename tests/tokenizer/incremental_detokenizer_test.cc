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
  // pushed in random chunks: the deltas always add up to decode_output_text of all of them, with
  // special tokens skipped or shown (a last special one left out where it ended the output).
  const Tokenizer t = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> id(0, 520), chunk(1, 4);
  int shown_specials = 0, dropped_last = 0, kept_last = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const bool skip_special = trial % 2 == 0;
    std::vector<int32_t> ids(static_cast<size_t>(1 + trial % 40));
    for (int32_t& v : ids)
      v = id(rng);
    if (trial % 4 == 1) ids.back() = 2;  // often end on a special token (<|end_of_text|>)
    ASSERT_TRUE(t.is_special(2));
    IncrementalDetokenizer detok(t, skip_special);
    std::string streamed;
    for (size_t i = 0; i < ids.size();) {
      const size_t n = std::min(ids.size() - i, static_cast<size_t>(chunk(rng)));
      streamed +=
          detok.push(std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(i),
                                          ids.begin() + static_cast<std::ptrdiff_t>(i + n)));
      i += n;
      EXPECT_EQ(detok.settled_text(), streamed);
    }
    // Half the outputs ended on their last token (an end-of-sequence or stop token), half were
    // cut (max_tokens).
    const bool ended = trial % 3 != 0;
    streamed += detok.finish(ended);
    ASSERT_EQ(streamed, decode_output_text(t, ids, skip_special, ended)) << "trial " << trial;
    if (skip_special) {
      ASSERT_EQ(streamed, t.decode(ids, true, true)) << "trial " << trial;
    } else {
      // Every special token shows, but a last one that ended the output.
      const bool drop_last = ended && t.is_special(ids.back());
      const std::span<const int32_t> kept(ids.data(), ids.size() - (drop_last ? 1 : 0));
      ASSERT_EQ(streamed, t.decode(kept, false, true)) << "trial " << trial;
      shown_specials += t.decode(kept, false, true) != t.decode(kept, true, true);
      dropped_last += drop_last;
      kept_last += !ended && t.is_special(ids.back());
    }
  }
  EXPECT_GT(shown_specials, 20);  // the shown case is not the skipped one in disguise
  EXPECT_GT(dropped_last, 20);
  EXPECT_GT(kept_last, 5);
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
