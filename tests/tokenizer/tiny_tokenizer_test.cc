// The built-in tiny model's tokenizer: exactly the vocabulary asked for, specials at 0-5 with BOS
// added by the template, frequent corpus words as single tokens, and any UTF-8 text back intact
// through encode and decode.
#include "quench/tokenizer/tiny_tokenizer.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"
#include "quench/tokenizer/tokenizer.h"

namespace quench {
namespace {

TEST(TinyTokenizer, VocabularySpecialsAndRoundTrip) {
  const Tokenizer t = Tokenizer::from_json(tiny_tokenizer_json(512), "tiny");
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.token_to_id("<|begin_of_text|>"), 1);
  EXPECT_EQ(t.token_to_id("<|end_of_text|>"), 2);
  EXPECT_TRUE(t.is_special(2));
  const std::vector<int32_t> ids = t.encode("the cache");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);       // BOS
  EXPECT_LE(ids.size(), 4u);  // "the", " cache" are frequent in the corpus
  for (const char* text :
       {"The quick brown fox jumps over the lazy dog.", "", "  spaces\n\nand\tTabs ",
        "Zürich, 東京, القاهرة 👍🏽", "12345 * 678 = 8377010"}) {
    const std::vector<int32_t> encoded = t.encode(text, false);
    for (int32_t id : encoded)
      EXPECT_GE(id, 6) << text;  // no special token from plain text
    EXPECT_EQ(t.decode(encoded), text);
    EXPECT_EQ(t.decode(t.encode(text, true), true), text);
  }
  EXPECT_EQ(t.token_to_id("<|eot_id|>"), 5);
  EXPECT_QUENCH_ERROR(tiny_tokenizer_json(100), {"vocab_size 100", ">= 262"});
}

}  // namespace
}  // namespace quench
