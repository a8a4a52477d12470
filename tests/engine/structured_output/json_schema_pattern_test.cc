// Structured output with "pattern": the prefix decodes a string's characters (UTF-8, escapes,
// surrogate pairs) and steps them through the pattern, refusing at the first byte that leaves
// it; random walks over every admitted byte never reach a dead end and always end on a string
// the pattern (and its length bounds) admits; the token masks follow the prefix; and on the
// engine a request with a patterned property ends on a matching value.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/core/error.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"

namespace quench {
namespace {

using nlohmann::json;

// {"s": <a string of `string_schema`>}, required, nothing else.
std::shared_ptr<const JsonSchema> object_with_string(const json& string_schema) {
  return testing_support::one_property_object("s", string_schema);
}

std::shared_ptr<const JsonSchema> patterned(const char* pattern, int64_t min = 0,
                                            int64_t max = -1) {
  json s = {{"type", "string"}, {"pattern", pattern}};
  if (min > 0) s["minLength"] = min;
  if (max >= 0) s["maxLength"] = max;
  return object_with_string(s);
}

// The bytes of `value` after {"s": " are accepted, and `"}` completes the text.
constexpr const char* kOpen = "{\"s\": \"";  // the string's bytes follow

bool admits(const JsonSchema& schema, const std::string& value) {
  return testing_support::admits_whole(schema, kOpen + value + "\"}");
}

// The string's bytes are refused at byte `at` (the ones before accepted).
void expect_refused_at(const JsonSchema& schema, const std::string& value, size_t at) {
  testing_support::expect_refused_at(schema, kOpen + value, std::string(kOpen).size() + at);
}

TEST(JsonSchemaPattern, StringsFollowThePattern) {
  const auto phone = patterned("^\\d{3}-\\d{4}$");
  EXPECT_TRUE(admits(*phone, "555-1234"));
  expect_refused_at(*phone, "55a", 2);
  expect_refused_at(*phone, "555-123\"", 7);  // the closing quote before the pattern ends
  expect_refused_at(*phone, "555-12345", 8);  // nothing may follow the end
  // Unanchored: a match anywhere.
  const auto contains = patterned("ab");
  EXPECT_TRUE(admits(*contains, "xxabyy"));
  EXPECT_TRUE(admits(*contains, "ab"));
  expect_refused_at(*contains, "x\"", 1);
  // Escapes are the characters they stand for.
  const auto letters = patterned("^[a-c\\n\"]+$");
  EXPECT_TRUE(admits(*letters, "a\\nb\\\"\\u0063"));
  expect_refused_at(*letters, "a\\t", 2);      // \t is a tab: not in the class
  expect_refused_at(*letters, "a\\u0064", 6);  // d
  expect_refused_at(*letters, "a\\u1", 3);     // no character in U+1000-U+1FFF fits
}

TEST(JsonSchemaPattern, Utf8AndSurrogatePairs) {
  const auto accented = patterned("^[\\u00e0-\\u00ff]+$");
  EXPECT_TRUE(admits(*accented, "\xc3\xa9\xc3\xa0"));  // é à
  expect_refused_at(*accented, "\xe4", 0);             // a three-byte character: none fits
  expect_refused_at(*accented, "\xc3\x80", 1);         // À (U+00C0) is outside
  expect_refused_at(*accented, "\xc0\x80", 0);         // an overlong lead byte
  const auto one = patterned("^.$");
  EXPECT_TRUE(admits(*one, "\xf0\x9f\x98\x80"));  // U+1F600 raw
  EXPECT_TRUE(admits(*one, "\\ud83d\\ude00"));    // and as a pair of escapes
  expect_refused_at(*one, "\\ud83dx", 6);         // a high surrogate needs its low half
  expect_refused_at(*one, "\\ud83d\\n", 7);       // as an escape
  expect_refused_at(*one, "\\udc", 3);            // a low surrogate alone is not a character
  expect_refused_at(*one, "\xed\xa0", 1);         // nor a surrogate encoded in UTF-8
  // Only the BMP: a high surrogate's escape is refused at the digit that makes it one.
  const auto bmp = patterned("^[\\u0000-\\uffff]$");
  expect_refused_at(*bmp, "\\ud83d", 3);
  EXPECT_TRUE(admits(*bmp, "\\uffff"));
}

TEST(JsonSchemaPattern, LengthBoundsWithThePattern) {
  const auto bounded = patterned("^a+$", 2, 3);
  expect_refused_at(*bounded, "a\"", 1);
  EXPECT_TRUE(admits(*bounded, "aa"));
  EXPECT_TRUE(admits(*bounded, "a\\u0061a"));  // an escape is one character
  expect_refused_at(*bounded, "aaaa", 3);
  // A choice that cannot end within maxLength is refused where it is made.
  const auto choice = patterned("^(a|bbbbb)c*$", 0, 3);
  expect_refused_at(*choice, "b", 0);
  EXPECT_TRUE(admits(*choice, "acc"));
  // Schemas that admit no string are refused.
  EXPECT_THROW(patterned("^a{5}$", 0, 3), Error);
}

TEST(JsonSchemaPattern, EnumValuesMustMatchAndErrorsNameThePlace) {
  EXPECT_NO_THROW(object_with_string({{"enum", {"ab", "cd"}}, {"pattern", "^[a-d]+$"}}));
  try {
    object_with_string({{"enum", {"ab", "x"}}, {"pattern", "^[a-d]+$"}});
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the enum value \"x\" does not match"), std::string::npos)
        << e.what();
  }
  try {
    patterned("(a)\\1");
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("#/properties/s"), std::string::npos) << what;
    EXPECT_NE(what.find("backreferences are not supported"), std::string::npos) << what;
  }
}

// An unbounded pattern's prefixes in one automaton state share a key (so a mask), whatever
// their length; with a length bound they do not.
TEST(JsonSchemaPattern, KeysCountCharactersOnlyWhereBoundsReadThem) {
  auto key_after = [](const JsonSchema& schema, const std::string& value) {
    JsonSchemaPrefix p(schema);
    EXPECT_TRUE(p.feed("{\"s\": \"") && p.feed(value)) << value;
    return p.key();
  };
  const auto letters = patterned("^[a-z]+$");
  EXPECT_EQ(key_after(*letters, "ab"), key_after(*letters, "abc"));
  const auto bounded = patterned("^[a-z]+$", 0, 10);
  EXPECT_NE(key_after(*bounded, "ab"), key_after(*bounded, "abc"));
}

// From {"s": ", random walks over every byte the prefix admits: each state admits some byte
// (no dead end), and each walk that closes the string ends on a value the pattern admits.
TEST(JsonSchemaPattern, RandomWalksNeverDeadEndAndEndOnMatches) {
  struct Case {
    const char* pattern;
    int64_t min, max;
  };
  std::mt19937 rng(7);
  for (const Case& c : {Case{"^[a-c]{2,4}$", 0, -1}, Case{"^(a|bbbbb)+$", 0, 7}, Case{"x\\d", 3, 6},
                        Case{"^.{1,3}$", 0, -1}, Case{"^[\\u00e0-\\u00ff\\u4e00]+\\S?$", 2, 4},
                        Case{"^(\\ud83d\\ude00|[\"\\\\/])+$", 0, 5}}) {
    const auto compiled = StringPattern::compile(c.pattern, c.min, c.max);
    const auto schema = patterned(c.pattern, c.min, c.max);
    int ended = 0;
    for (int walk = 0; walk < 60; ++walk) {
      JsonSchemaPrefix p(*schema);
      ASSERT_TRUE(p.feed("{\"s\": \""));
      std::string text = "{\"s\": \"";
      bool closed = false;
      for (int step = 0; step < 400 && !closed; ++step) {
        std::vector<int> admitted;
        for (int b = 0; b < 256; ++b) {
          JsonSchemaPrefix next = p;
          const char byte = static_cast<char>(b);
          if (next.feed(std::string_view(&byte, 1))) admitted.push_back(b);
        }
        ASSERT_FALSE(admitted.empty()) << c.pattern << " dead end after " << json(text).dump();
        // Type '"' where allowed (to close, or in an escape) half of the time, so that walks end.
        const bool may_close = std::find(admitted.begin(), admitted.end(), '"') != admitted.end();
        const int b = may_close && rng() % 2 == 0 ? '"' : admitted[rng() % admitted.size()];
        const char byte = static_cast<char>(b);
        ASSERT_TRUE(p.feed(std::string_view(&byte, 1)));
        text += byte;
        // A '"' closes the string unless it was an escape's (then '}' cannot complete).
        JsonSchemaPrefix after = p;
        closed = b == '"' && after.feed("}") && after.complete();
      }
      if (!closed) continue;
      ASSERT_TRUE(p.feed("}") && p.complete()) << text;
      const std::string value = json::parse(text + "}").at("s").get<std::string>();
      EXPECT_TRUE(compiled->matches(value)) << c.pattern << " on " << json(value).dump();
      ++ended;
    }
    EXPECT_GE(ended, 30) << c.pattern << ": too few walks ended to check";
  }
}

// ---- masks and the engine ----

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_json_schema_pattern_test", name);
}

TEST(JsonSchemaPattern, MasksAllowExactlyTheTokensThePrefixAccepts) {
  const LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("masks")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  JsonTokenMasks masks(tokenizer, engine.eos_token_ids());
  const auto schema = patterned("^[a-f]+(-\\d)?$", 0, 6);
  for (const std::string text : {"{\"s\": \"", "{\"s\": \"abc", "{\"s\": \"abcd-"}) {
    JsonSchemaPrefix prefix(*schema);
    ASSERT_TRUE(prefix.feed(text)) << text;
    testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix, engine.eos_token_ids(),
                                                text);
  }
}

TEST(JsonSchemaPattern, EngineOutputsMatchThePattern) {
  LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("engine")));
  const char* pattern = "^[a-e]{2,5}-\\d$";
  const auto schema = patterned(pattern);
  SamplingParams params = testing_support::greedy(256);
  params.json_schema = schema;
  const std::regex reference(pattern, std::regex::ECMAScript);
  for (const auto& [text, finish] :
       testing_support::greedy_and_sampled_outputs(engine, params, 3)) {
    ASSERT_EQ(finish, FinishReason::kStop) << json(text).dump();
    const std::string value = json::parse(text).at("s").get<std::string>();
    EXPECT_TRUE(std::regex_search(value, reference)) << text;
  }
}

}  // namespace
}  // namespace quench
