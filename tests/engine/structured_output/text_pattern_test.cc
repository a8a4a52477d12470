// Structured output over raw text (guided_regex / guided_choice): the whole output matches the
// pattern from start to end; it may stop (the end-of-sequence token is allowed) wherever it
// matches, and is complete where nothing may follow; the masks allow the stop tokens exactly
// there; on the engine a choice request ends on one of its choices.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"
#include "quench/engine/structured_output/regex_syntax.h"
#include "quench/ops/sampling/logit_edits.h"

namespace quench {
namespace {

TEST(TextPattern, WholeTextMatchesAndEnds) {
  const auto choice = JsonSchema::text_pattern("yes|no|maybe so");
  JsonSchemaPrefix p(*choice);
  EXPECT_FALSE(p.may_stop());
  EXPECT_TRUE(p.feed("ye"));
  EXPECT_FALSE(p.may_stop());
  EXPECT_FALSE(p.complete());
  EXPECT_TRUE(p.feed("s"));
  EXPECT_TRUE(p.complete());  // nothing may follow "yes"
  EXPECT_FALSE(p.feed(" "));
  JsonSchemaPrefix q(*choice);
  EXPECT_FALSE(q.feed("x"));
  // Full match: no implicit prefix or suffix, and ^ / $ at the ends change nothing.
  const auto digits = JsonSchema::text_pattern("^[0-9]+$");
  JsonSchemaPrefix d(*digits);
  EXPECT_FALSE(d.feed(" 1"));
  JsonSchemaPrefix e(*digits);
  EXPECT_TRUE(e.feed("12"));
  EXPECT_TRUE(e.may_stop());   // may end on the end-of-sequence token
  EXPECT_FALSE(e.complete());  // or go on
  EXPECT_FALSE(e.feed("a"));
  // Raw text: newlines and quotes are characters, UTF-8 is decoded.
  const auto lines = JsonSchema::text_pattern("(\"[a-z\\u00e9]+\"\\n){2}");
  JsonSchemaPrefix l(*lines);
  EXPECT_TRUE(l.feed("\"caf\xc3\xa9\"\n\"x\"\n"));
  EXPECT_TRUE(l.complete());
  JsonSchemaPrefix u(*lines);
  EXPECT_TRUE(u.feed("\"caf\xc3"));  // a lead byte whose characters include é
  EXPECT_FALSE(u.may_stop());
  EXPECT_FALSE(u.feed("\xa0"));  // à is not in the class
}

TEST(TextPattern, RegexLiteralEscapesMetacharacters) {
  for (const std::string text : {"a.b", "(x|y)*", "1+1=2?", "[tag]{3}", "back\\slash", "^$-/"}) {
    const auto p = JsonSchema::text_pattern(regex_literal(text));
    JsonSchemaPrefix prefix(*p);
    EXPECT_TRUE(prefix.feed(text) && prefix.complete()) << text;
  }
}

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_text_pattern_test", name);
}

TEST(TextPattern, MasksAllowStopTokensWhereTheTextMayEnd) {
  LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("engine")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  const std::vector<int32_t>& stops = engine.eos_token_ids();
  ASSERT_FALSE(stops.empty());
  JsonTokenMasks masks(tokenizer, stops);
  const auto digits = JsonSchema::text_pattern("[0-9]+");
  for (const std::string text : {"", "1", "12"}) {
    JsonSchemaPrefix prefix(*digits);
    ASSERT_TRUE(prefix.feed(text));
    const std::vector<uint32_t> bits =
        testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix, stops, text);
    for (int32_t stop : stops) {
      EXPECT_EQ(logit_allowed(bits.data(), static_cast<int32_t>(bits.size()), stop), !text.empty())
          << '"' << text << '"';
    }
  }
  // A choice request ends on one of its choices, greedy or sampled.
  SamplingParams params = testing_support::greedy(64);
  params.text_pattern = JsonSchema::text_pattern(
      regex_literal("prefill") + "|" + regex_literal("decode") + "|" + regex_literal("cache hit"));
  for (const auto& [text, finish] :
       testing_support::greedy_and_sampled_outputs(engine, params, 4)) {
    EXPECT_EQ(finish, FinishReason::kStop) << text;
    EXPECT_TRUE(text == "prefill" || text == "decode" || text == "cache hit") << text;
  }
}

}  // namespace
}  // namespace quench
