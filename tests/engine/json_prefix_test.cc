// JSON mode: the object-prefix recogniser accepts every prefix of valid objects (escapes,
// numbers, literals, nesting, whitespace) and refuses at the first byte that leaves them; the
// token masks allow exactly the tokens whose bytes it accepts; on the engine a JSON-mode request
// only ever holds a prefix of an object and ends, finish "stop", when it closes.
#include "quench/engine/json_prefix.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/tiny_engine.h"
#include "quench/engine/llm_engine.h"
#include "quench/ops/sampling/logit_edits.h"

namespace quench {
namespace {

// Every prefix of `text` is accepted byte by byte; the whole is a complete object.
void expect_object(const std::string& text) {
  JsonObjectPrefix p;
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_FALSE(p.complete()) << text << " complete before byte " << i;
    ASSERT_TRUE(p.feed(text.substr(i, 1))) << text << " refused at byte " << i;
  }
  EXPECT_TRUE(p.complete()) << text;
}

// `text` is refused, at byte `at` (the bytes before it are accepted).
void expect_refused_at(const std::string& text, size_t at) {
  JsonObjectPrefix p;
  ASSERT_TRUE(p.feed(text.substr(0, at))) << text << " refused before byte " << at;
  EXPECT_FALSE(p.feed(text.substr(at, 1))) << text << " accepted byte " << at;
}

TEST(JsonObjectPrefix, AcceptsValidObjects) {
  for (const std::string& text :
       {std::string("{}"), std::string(" {\"a\": 1}"),
        std::string("{\"a\":[1,-0.5,2e10,3.25E-3,0,true,false,null,\"x\"]}"),
        std::string("{\"k\\\"\\\\\\/\\n\\u00e9\": {\"n\": {\"m\": []}}, \"z\": \"\xc3\xa9\"}"),
        std::string("{\n  \"a\" : [ { } , [ ] ]\n}")}) {
    expect_object(text);
    EXPECT_TRUE(nlohmann::json::accept(text)) << text;  // the test's texts are JSON
  }
}

TEST(JsonObjectPrefix, RefusesAtTheFirstWrongByte) {
  expect_refused_at("[1]", 0);                // the top level is an object
  expect_refused_at("{'a': 1}", 1);           // single quotes
  expect_refused_at("{\"a\" 1}", 5);          // no colon
  expect_refused_at("{\"a\": 01}", 7);        // a leading zero
  expect_refused_at("{\"a\": 1,}", 8);        // a trailing comma
  expect_refused_at("{\"a\": tru }", 9);      // a broken literal
  expect_refused_at("{\"a\": \"\x01\"}", 7);  // a raw control character
  expect_refused_at("{\"a\": \"\\x\"}", 8);   // an unknown escape
  expect_refused_at("{\"a\": 1]", 7);         // the wrong closer
  expect_refused_at("{} ", 2);                // nothing after the object
  expect_refused_at("{\"a\": 1.}", 8);        // a fraction needs digits
  // Whitespace runs are bounded.
  const std::string spaces(JsonObjectPrefix::kMaxWhitespaceRun + 1, ' ');
  expect_refused_at("{" + spaces, 1 + JsonObjectPrefix::kMaxWhitespaceRun);
}

TEST(JsonObjectPrefix, NestingIsBounded) {
  std::string deep = "{\"a\":";
  for (size_t i = 1; i < JsonObjectPrefix::kMaxDepth; ++i)
    deep += "[";
  expect_refused_at(deep + "[", deep.size());
}

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_json_prefix_test", name);
}

TEST(JsonTokenMasks, AllowExactlyTheTokensThePrefixAccepts) {
  const LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("masks")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  JsonTokenMasks masks(tokenizer);
  JsonObjectPrefix prefix;
  ASSERT_TRUE(prefix.feed("{\"a\": [1, "));
  const std::vector<uint8_t>& allowed = masks.allowed(prefix);
  const std::vector<uint32_t>& bits = masks.allowed_bits(prefix);
  ASSERT_EQ(bits.size(), (static_cast<size_t>(tokenizer.vocab_size()) + 31) / 32);
  int32_t count = 0;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    JsonObjectPrefix next = prefix;
    const bool accepts = !tokenizer.is_special(id) &&
                         next.feed(tokenizer.token_bytes(id, true, true)) &&
                         !tokenizer.token_bytes(id, true, true).empty();
    EXPECT_EQ(allowed[static_cast<size_t>(id)] != 0, accepts) << "token " << id;
    EXPECT_EQ(logit_allowed(bits.data(), static_cast<int32_t>(bits.size()), id), accepts)
        << "token " << id;
    count += accepts ? 1 : 0;
  }
  EXPECT_GT(count, 0);
  EXPECT_LT(count, tokenizer.vocab_size());
}

// Every output is a prefix of a JSON object; with '}' pushed up by a bias the object closes at
// once ("{}") and the request ends with finish "stop".
TEST(JsonMode, OutputsStayObjectPrefixesAndEndWhenTheObjectCloses) {
  LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("engine")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  SamplingParams s = testing_support::greedy(40);
  s.json_object = true;
  SamplingParams sampled = s;
  sampled.temperature = 1.0f;
  sampled.seed = 7;
  for (const SamplingParams& params : {s, sampled}) {
    for (const RequestOutput& out : engine.generate({{5, 6, 7}, {9, 10, 11, 12}}, params)) {
      const std::string text = tokenizer.decode(out.output, true);
      JsonObjectPrefix p;
      EXPECT_TRUE(p.feed(text)) << text;
      if (out.finish_reason == FinishReason::kStop) {
        EXPECT_TRUE(p.complete()) << text;
        EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
      }
    }
  }
  const std::optional<int32_t> close = tokenizer.token_to_id("}");
  ASSERT_TRUE(close.has_value());
  s.logit_bias = {{*close, 100.0f}};
  const RequestOutput closed = engine.generate({{5, 6, 7}}, s)[0];
  EXPECT_EQ(closed.finish_reason, FinishReason::kStop);
  const std::string text = tokenizer.decode(closed.output, true);
  EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
  EXPECT_EQ(text.find_first_not_of(" \t\n\r"), text.find('{'));
}

}  // namespace
}  // namespace quench
