// Structured output's unions that neither the first byte nor a tag decides: the prefix follows
// every alternative at once (objects without a tag, objects that share keys with different
// schemas, numbers of overlapping types and bounds, an enum beside a patterned string, unions in
// arrays whose numbers end at ',' and ']'), refusing at the first byte no alternative takes; the
// masks follow the prefix, random walks never dead-end, and the engine ends on a value of one of
// the alternatives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/engine/structured_output/json_token_masks.h"

namespace quench {
namespace {

using nlohmann::json;

using testing_support::admits_whole;
using testing_support::closed_object;
using testing_support::expect_refused_at;

// {"u": <a value of `property`>}, nothing else.
std::shared_ptr<const JsonSchema> object_with(const json& property) {
  return testing_support::one_property_object("u", property);
}

TEST(JsonSchemaUnion, ObjectsWithoutATag) {
  const auto s = object_with({{"anyOf",
                               {closed_object({{"a", {{"type", "integer"}}}}, {"a"}),
                                closed_object({{"b", {{"type", "string"}}}}, {"b"})}}});
  EXPECT_TRUE(admits_whole(*s, R"({"u": {"a": 1}})"));
  EXPECT_TRUE(admits_whole(*s, R"({"u": {"b": "x"}})"));
  expect_refused_at(*s, R"({"u": {"a": "x"}})", 12);          // a is an integer
  expect_refused_at(*s, R"({"u": {"c": 1}})", 8);             // no alternative has c
  expect_refused_at(*s, R"({"u": {}})", 7);                   // each requires its key
  expect_refused_at(*s, R"({"u": {"a": 1, "b": "x"}})", 13);  // a's object has no more keys
}

TEST(JsonSchemaUnion, SharedKeysWithDifferentSchemas) {
  const auto s = object_with(
      {{"oneOf",
        {closed_object({{"k", {{"type", "integer"}}}}, {"k"}),
         closed_object({{"k", {{"type", "string"}}}, {"m", {{"type", "boolean"}}}}, {"k", "m"})}}});
  EXPECT_TRUE(admits_whole(*s, R"({"u": {"k": 1}})"));
  EXPECT_TRUE(admits_whole(*s, R"({"u": {"k": "s", "m": true}})"));
  expect_refused_at(*s, R"({"u": {"k": "s"}})", 15);  // the string one needs m
  expect_refused_at(*s, R"({"u": {"k": 1, "m": true}})", 13);
}

TEST(JsonSchemaUnion, NumbersStringsAndEnums) {
  const auto numbers = object_with(
      {{"anyOf", {{{"type", "integer"}, {"maximum", 5}}, {{"type", "number"}, {"minimum", 100}}}}});
  EXPECT_TRUE(admits_whole(*numbers, R"({"u": 3})"));
  EXPECT_TRUE(admits_whole(*numbers, R"({"u": 150.5})"));
  expect_refused_at(*numbers, R"({"u": 50})", 8);  // 50 could still become 500, not end
  expect_refused_at(*numbers, R"({"u": 3.5})", 7);
  const auto auto_or_digits = object_with(
      {{"anyOf", {{{"enum", {"auto"}}}, {{"type", "string"}, {"pattern", "^[0-9]+$"}}}}});
  EXPECT_TRUE(admits_whole(*auto_or_digits, R"({"u": "auto"})"));
  EXPECT_TRUE(admits_whole(*auto_or_digits, R"({"u": "123"})"));
  expect_refused_at(*auto_or_digits, R"({"u": "aut"})", 10);
  expect_refused_at(*auto_or_digits, R"({"u": "1a"})", 8);
  // A value one alternative has finished while another goes on.
  const auto enum_or_large =
      object_with({{"anyOf", {{{"enum", {1, 12}}}, {{"type", "integer"}, {"minimum", 100}}}}});
  for (const char* ok : {R"({"u": 1})", R"({"u": 12})", R"({"u": 123})", R"({"u": 130})"})
    EXPECT_TRUE(admits_whole(*enum_or_large, ok)) << ok;
  expect_refused_at(*enum_or_large, R"({"u": 13})", 8);
  expect_refused_at(*enum_or_large, R"({"u": -1})", 6);
  // Tags that do not qualify (not required, several values, not strings, repeated) leave an
  // untagged union, followed alternative by alternative.
  const auto loose = object_with(
      {{"anyOf",
        {{{"type", "object"}, {"properties", {{"t", {{"const", "a"}}}}}},
         {{"type", "object"}, {"properties", {{"t", {{"const", "b"}}}}}, {"required", {"t"}}}}}});
  EXPECT_TRUE(admits_whole(*loose, R"({"u": {}})"));
  EXPECT_TRUE(admits_whole(*loose, R"({"u": {"t": "b"}})"));
  const auto object_or_null = object_with(
      {{"anyOf",
        {{{"type", {"object", "null"}},
          {"properties", {{"t", {{"const", "a"}}}}},
          {"required", {"t"}}},
         {{"type", "object"}, {"properties", {{"t", {{"const", "b"}}}}}, {"required", {"t"}}}}}});
  EXPECT_TRUE(admits_whole(*object_or_null, R"({"u": null})"));
  EXPECT_TRUE(admits_whole(*object_or_null, R"({"u": {"t": "b"}})"));
  expect_refused_at(*object_or_null, R"({"u": {"t": "c"}})", 13);
}

TEST(JsonSchemaUnion, UnionsInArraysEndAtCommasAndBrackets) {
  const auto s = JsonSchema::compile(json{
      {"type", "array"},
      {"items",
       {{"anyOf",
         {{{"type", "integer"}, {"minimum", 10}}, {{"type", "integer"}, {"maximum", -10}}}}}}});
  EXPECT_TRUE(admits_whole(*s, "[12,-15, 10 ]"));
  EXPECT_TRUE(admits_whole(*s, "[]"));
  expect_refused_at(*s, "[5]", 2);   // 5 may still become 50, but not end
  expect_refused_at(*s, "[-5,", 3);  // -5 fits neither
  // Nested unions: a union whose alternative is a union.
  const auto nested =
      object_with({{"anyOf",
                    {{{"anyOf", {{{"type", "integer"}}, {{"type", "number"}, {"minimum", 0.5}}}}},
                     {{"type", "string"}}}}});
  EXPECT_TRUE(admits_whole(*nested, R"({"u": 0.75})"));
  EXPECT_TRUE(admits_whole(*nested, R"({"u": -3})"));
  EXPECT_TRUE(admits_whole(*nested, R"({"u": "x"})"));
  expect_refused_at(*nested, R"({"u": 0.25})", 8);  // 0.2x is no integer, and below 0.5
}

// From the union's start, random walks over every admitted byte never dead-end, and every
// completed text parses and matches one alternative (checked by a prefix of that alternative).
TEST(JsonSchemaUnion, RandomWalksNeverDeadEnd) {
  const json alternatives = {
      closed_object({{"a", {{"type", "integer"}, {"minimum", 0}}}}, {"a"}),
      closed_object({{"a", {{"type", "string"}, {"maxLength", 3}}}, {"b", {{"type", "boolean"}}}},
                    {"a", "b"}),
      {{"type", "array"}, {"items", {{"type", "integer"}}}, {"maxItems", 2}}};
  const auto s = object_with({{"anyOf", alternatives}});
  std::mt19937 rng(5);
  int ended = 0;
  for (int walk = 0; walk < 200; ++walk) {
    JsonSchemaPrefix p(*s);
    std::string text;
    for (int step = 0; step < 200 && !p.complete(); ++step) {
      std::vector<int> admitted;
      for (int b = 0; b < 128; ++b) {  // ASCII: the texts are parsed back below
        JsonSchemaPrefix next = p;
        const char byte = static_cast<char>(b);
        if (next.feed(std::string_view(&byte, 1))) admitted.push_back(b);
      }
      ASSERT_FALSE(admitted.empty()) << "dead end after " << json(text).dump();
      // Prefer structure over string contents, so that walks end.
      std::vector<int> closers;
      for (int b : admitted)
        if (b == '}' || b == ']' || b == '"' || b == ',' || b == 't' || b == '1')
          closers.push_back(b);
      const int b = !closers.empty() && rng() % 2 == 0 ? closers[rng() % closers.size()]
                                                       : admitted[rng() % admitted.size()];
      const char byte = static_cast<char>(b);
      ASSERT_TRUE(p.feed(std::string_view(&byte, 1)));
      text += byte;
    }
    if (!p.complete()) continue;
    ++ended;
    const json u = json::parse(text).at("u");
    bool matched = false;
    for (const json& alternative : alternatives) {
      const auto one = object_with(alternative);
      matched = matched || admits_whole(*one, json{{"u", u}}.dump());
    }
    EXPECT_TRUE(matched) << text;
  }
  EXPECT_GE(ended, 50);
}

std::string tiny_model_dir(const std::string& name) {
  return testing_support::tiny_model_dir("quench_json_schema_union_test", name);
}

TEST(JsonSchemaUnion, MasksAndTheEngine) {
  LlmEngine engine(testing_support::tiny_engine_options(tiny_model_dir("engine")));
  const Tokenizer& tokenizer = *engine.tokenizer();
  const json alternatives = {
      closed_object({{"id", {{"type", "integer"}}}}, {"id"}),
      closed_object({{"name", {{"type", "string"}, {"maxLength", 8}}}}, {"name"})};
  const auto schema = object_with({{"anyOf", alternatives}});
  JsonTokenMasks masks(tokenizer, engine.eos_token_ids());
  for (const std::string text : {"{\"u\": ", "{\"u\": {", "{\"u\": {\"", "{\"u\": {\"id\": 1"}) {
    JsonSchemaPrefix prefix(*schema);
    ASSERT_TRUE(prefix.feed(text)) << text;
    testing_support::expect_mask_follows_prefix(tokenizer, masks, prefix, engine.eos_token_ids(),
                                                text);
  }
  SamplingParams params = testing_support::greedy(256);
  params.json_schema = schema;
  params.temperature = 1.0f;
  params.seed = 21;
  for (const auto& [text, finish] : testing_support::outputs_of(engine, {params})) {
    ASSERT_EQ(finish, FinishReason::kStop) << json(text).dump();
    const json u = json::parse(text).at("u");
    EXPECT_TRUE((u.size() == 1 && u.contains("id") && u["id"].is_number_integer()) ||
                (u.size() == 1 && u.contains("name") && u["name"].is_string()))
        << text;
  }
}

}  // namespace
}  // namespace quench
