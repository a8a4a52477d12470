// Streaming text: one token at a time, no delta ever carries a U+FFFD that the final text lacks
// (multi-byte characters span several byte-level tokens), and the deltas add up to the whole.
#include "quench/server/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include "quench/tokenizer/tiny_tokenizer.h"

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

}  // namespace
}  // namespace quench
