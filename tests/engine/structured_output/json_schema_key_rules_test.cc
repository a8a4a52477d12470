// Structured output's patternProperties and propertyNames (key_automaton.h): the prefix admits an
// object exactly where a reference validator written here does (std::regex searches for the
// patterns, each value checked against its schemas compiled alone), over every object of up to
// two keys from a small alphabet; random walks that take any admitted byte never reach a byte
// with no continuation and end in objects the reference admits; keys are written in JSON's
// canonical spelling; what cannot be compiled exactly is refused by name; and the engine's
// outputs under such a schema are admitted objects.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "harness/expect_error.h"
#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/core/error.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema.h"
#include "quench/engine/structured_output/json_schema_prefix.h"
#include "quench/tokenizer/utf8.h"

namespace quench {
namespace {

using nlohmann::json;
using testing_support::admits_whole;
using testing_support::expect_refused_at;

// JSON Schema's search semantics for a pattern (ECMA-262); the tests' patterns and keys agree
// byte for byte and code point for code point (no '.', no negated classes).
bool searches(const std::string& pattern, const std::string& key) {
  static std::map<std::string, std::regex> compiled;
  auto it = compiled.find(pattern);
  if (it == compiled.end()) it = compiled.emplace(pattern, std::regex(pattern)).first;
  return std::regex_search(key, it->second);
}

// A value against one schema, compiled alone (no key rules in the tests' value schemas).
bool value_meets(const json& schema, const json& value) {
  if (schema.is_boolean()) return schema.get<bool>();
  static std::map<std::string, std::shared_ptr<const JsonSchema>> compiled;
  auto& s = compiled[schema.dump()];
  if (!s) s = testing_support::one_property_object("v", schema);
  return admits_whole(*s, "{\"v\": " + value.dump() + "}");
}

bool name_meets(const json& names, const std::string& key) {
  if (names.is_boolean()) return names.get<bool>();
  const auto length = static_cast<int64_t>(decode_utf8(key).size());
  if (names.contains("pattern") && !searches(names["pattern"].get<std::string>(), key))
    return false;
  if (names.contains("minLength") && length < names["minLength"].get<int64_t>()) return false;
  if (names.contains("maxLength") && length > names["maxLength"].get<int64_t>()) return false;
  if (names.contains("const") && json(key) != names["const"]) return false;
  if (names.contains("enum")) {
    const json& values = names["enum"];
    if (std::find(values.begin(), values.end(), json(key)) == values.end()) return false;
  }
  return true;
}

// The reference: JSON Schema's object keywords read directly.
bool reference_admits(const json& schema, const json& object) {
  if (!object.is_object()) return false;
  const json properties = schema.value("properties", json::object());
  const json patterns = schema.value("patternProperties", json::object());
  const json additional = schema.value("additionalProperties", json(true));
  for (const auto& [key, value] : object.items()) {
    if (schema.contains("propertyNames") && !name_meets(schema["propertyNames"], key)) return false;
    bool covered = false;
    if (properties.contains(key)) {
      covered = true;
      if (!value_meets(properties[key], value)) return false;
    }
    for (const auto& [pattern, pattern_schema] : patterns.items()) {
      if (!searches(pattern, key)) continue;
      covered = true;
      if (!value_meets(pattern_schema, value)) return false;
    }
    if (!covered && !value_meets(additional, value)) return false;
  }
  for (const json& name : schema.value("required", json::array()))
    if (!object.contains(name.get<std::string>())) return false;
  const auto size = static_cast<int64_t>(object.size());
  if (size < schema.value("minProperties", int64_t{0})) return false;
  if (schema.contains("maxProperties") && size > schema["maxProperties"].get<int64_t>())
    return false;
  return true;
}

// Every object of at most two distinct keys of length 0-2 over {a, b, x, 1}, each with one of
// four values.
std::vector<std::string> small_objects() {
  std::vector<std::string> keys = {""};
  const std::string alphabet = "abx1";
  for (char c : alphabet)
    keys.push_back(std::string(1, c));
  for (char c : alphabet)
    for (char d : alphabet)
      keys.push_back(std::string{c, d});
  return testing_support::objects_of_two_keys_at_most(keys, {"1", "-2", "\"s\"", "null"});
}

void expect_matches_reference(const json& schema) {
  const auto compiled = JsonSchema::compile(schema);
  int admitted = 0, refused = 0;
  for (const std::string& text : small_objects()) {
    const bool expected = reference_admits(schema, json::parse(text));
    EXPECT_EQ(admits_whole(*compiled, text), expected) << schema.dump() << " on " << text;
    (expected ? admitted : refused) += 1;
  }
  EXPECT_GT(admitted, 0) << schema.dump();
  EXPECT_GT(refused, 0) << schema.dump();
}

// Walks that take a random admitted byte (closing bytes preferred after a while) never find a
// prefix that admits no byte, and the objects they finish parse and are admitted by the
// reference. Returns how many finished within the walk's length.
int expect_walks_never_stall(const json& schema, int walks) {
  const auto compiled = JsonSchema::compile(schema);
  std::mt19937 rng(11);
  int finished = 0;
  for (int w = 0; w < walks; ++w) {
    JsonSchemaPrefix prefix(*compiled);
    std::string text;
    while (!prefix.complete() && text.size() < 160) {
      std::vector<char> allowed, closing;
      for (int b = 0; b < 256; ++b) {
        JsonSchemaPrefix next = prefix;
        const char byte = static_cast<char>(b);
        if (!next.feed(std::string_view(&byte, 1))) continue;
        allowed.push_back(byte);
        if (b != 0 && std::strchr("\"}]:,", b) != nullptr) closing.push_back(byte);
      }
      if (allowed.empty()) {
        ADD_FAILURE() << schema.dump() << ": no byte continues " << text;
        return finished;
      }
      const bool close = text.size() > 16 && !closing.empty() && rng() % 4 != 0;
      const std::vector<char>& pool = close ? closing : allowed;
      const char byte = pool[rng() % pool.size()];
      prefix.feed(std::string_view(&byte, 1));
      text += byte;
    }
    if (!prefix.complete()) continue;
    ++finished;
    const json value = json::parse(text);
    EXPECT_TRUE(reference_admits(schema, value)) << schema.dump() << " on " << text;
  }
  return finished;
}

// The schemas of both checks: patterns alone, with listed properties, conflicting patterns,
// propertyNames' pattern, bounds, enum and const, a listed property propertyNames refuses.
std::vector<json> key_rule_schemas() {
  return {
      json::parse(R"({"type": "object", "patternProperties": {"^a": {"type": "integer"},
          "b$": {"type": "integer", "minimum": 0}}, "additionalProperties": false})"),
      json::parse(R"({"type": "object", "properties": {"ab": {"type": "integer", "maximum": 5}},
          "patternProperties": {"^a": {"minimum": 0}}, "required": ["ab"]})"),
      json::parse(R"({"type": "object", "patternProperties": {"^x": {"type": "string"},
          "1$": {"type": "integer"}}, "additionalProperties": {"type": "null"}})"),
      json::parse(R"({"type": "object", "propertyNames": {"pattern": "^[ab]+$", "maxLength": 1},
          "additionalProperties": {"type": "null"}})"),
      json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}},
          "propertyNames": {"enum": ["a", "b", 3]}, "additionalProperties": {"type": "string"}})"),
      json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}},
          "propertyNames": {"pattern": "^(a|b+)$"}, "additionalProperties": {"type": "string"}})"),
      json::parse(R"({"type": "object", "properties": {"b": {"type": "string"}},
          "propertyNames": {"minLength": 2}})"),
      json::parse(R"({"type": "object", "propertyNames": {"const": "x1"},
          "additionalProperties": {"type": "integer"}})"),
      json::parse(R"({"type": "object", "propertyNames": false})"),
      json::parse(R"({"type": "object", "patternProperties": {"1": false, "^b": {}},
          "additionalProperties": {"type": "integer"}})"),
      json::parse(R"({"type": "object", "patternProperties": {"^a": false},
          "additionalProperties": false})"),
      json::parse(R"({"type": "object", "properties": {"x": {"type": "integer"}},
          "patternProperties": {"^[ab]$": {"type": "null"}}, "propertyNames": {"maxLength": 1},
          "additionalProperties": false, "minProperties": 2})"),
  };
}

TEST(JsonSchemaKeyRules, AdmitsWhatTheReferenceAdmits) {
  for (const json& schema : key_rule_schemas())
    expect_matches_reference(schema);
}

TEST(JsonSchemaKeyRules, RandomWalksNeverStall) {
  int walks = 0, finished = 0;
  for (const json& schema : key_rule_schemas()) {
    finished += expect_walks_never_stall(schema, 40);
    walks += 40;
  }
  // Keys of any characters, the automaton stepped over UTF-8 and escapes.
  finished += expect_walks_never_stall(json::parse(R"({"type": "object", "patternProperties":
      {"^é": {"type": "integer"}, "[\u0001-\u001f]": {"type": "null"}},
      "propertyNames": {"maxLength": 3}})"),
                                       60);
  walks += 60;
  // Not vacuous: most walks end in an object (a required key typed at random takes longer).
  EXPECT_GT(finished, walks / 2);
}

TEST(JsonSchemaKeyRules, AListedKeyAlreadyPresentIsNoUnlistedKey) {
  // propertyNames allows "a" and "b", so both become listed properties; "a" is present: the
  // next key must be "b", and after it none may come.
  const auto few = JsonSchema::compile(key_rule_schemas()[4]);
  EXPECT_TRUE(admits_whole(*few, R"({"a": 1, "b": "x"})"));
  expect_refused_at(*few, R"({"a": 1, "a)", 10);
  expect_refused_at(*few, R"({"a": 1, "b": "x",)", 17);
  EXPECT_FALSE(admits_whole(*few, R"({"b": 1})"));  // additionalProperties' schema
  // "a" or "b", "bb", ...: after a present "a", a key starting with 'a' can only be "a" again.
  const auto many = JsonSchema::compile(key_rule_schemas()[5]);
  EXPECT_TRUE(admits_whole(*many, R"({"a": 1, "bbb": "x", "b": "y"})"));
  expect_refused_at(*many, R"({"a": 1, "a)", 10);
  expect_refused_at(*many, R"({"bb": "x", "ab)", 14);
}

TEST(JsonSchemaKeyRules, KeysAreWrittenInTheirCanonicalSpelling) {
  const auto s = JsonSchema::compile(key_rule_schemas()[1]);
  EXPECT_TRUE(admits_whole(*s, R"({"ab": 1, "é\n\u001f": 2})"));
  expect_refused_at(*s, R"({"\u0061b": 1})", 6);  // 'a' written as an escape
  expect_refused_at(*s, R"({"\u000a": 1})", 7);   // \n has a short escape
  expect_refused_at(*s, R"({"\u001F": 1})", 7);   // lowercase hex
  expect_refused_at(*s, R"({"\/": 1})", 3);       // '/' needs no escape
  // Multi-byte characters step the patterns: "^é" (two bytes) takes integers only.
  const auto accented = JsonSchema::compile(
      json::parse(R"({"type": "object", "patternProperties": {"^é": {"type": "integer"}}})"));
  EXPECT_TRUE(admits_whole(*accented, R"({"éa": 1, "e": "s"})"));
  EXPECT_FALSE(admits_whole(*accented, R"({"éa": "s"})"));
}

TEST(JsonSchemaKeyRules, WhatCannotBeCompiledIsRefusedByName) {
  auto expect_error = [](const char* schema, const char* message) {
    try {
      JsonSchema::compile(json::parse(schema));
      ADD_FAILURE() << schema << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"type": "object", "propertyNames": {"anyOf": [{"pattern": "a"}]}})",
               "keyword 'anyOf' is not supported in propertyNames");
  expect_error(R"({"type": "object", "properties": {"b": {}}, "required": ["b"],
      "propertyNames": {"pattern": "^a"}})",
               "a required property that propertyNames refuses");
  expect_error(R"({"type": "object", "patternProperties": {"(": {}}})", "patternProperties/(");
  expect_error(R"({"type": "object", "propertyNames": {"enum": ["a"]}, "minProperties": 2})",
               "minProperties 2 exceeds the 1 keys");
  expect_error(R"({"allOf": [{"type": "object", "patternProperties": {"^a": {}}},
      {"properties": {"b": {}}}]})",
               "these are merged only with parts without properties");
  expect_error(R"({"type": "object", "not": {}})", "keyword 'not' is not supported");
}

TEST(JsonSchemaKeyRules, EngineOutputsAreAdmittedObjects) {
  LlmEngine engine(testing_support::tiny_engine_options(
      testing_support::tiny_model_dir("quench_key_rules_test", "engine")));
  const json schema = json::parse(R"({"type": "object",
      "patternProperties": {"^[a-z]+$": {"type": "integer", "minimum": 0, "maximum": 9}},
      "propertyNames": {"maxLength": 3}, "additionalProperties": false,
      "minProperties": 1, "maxProperties": 3})");
  SamplingParams params = testing_support::greedy(128);
  params.json_schema = JsonSchema::compile(schema);
  for (const auto& [text, finish] :
       testing_support::greedy_and_sampled_outputs(engine, params, 5)) {
    ASSERT_EQ(finish, FinishReason::kStop) << json(text).dump();
    EXPECT_TRUE(reference_admits(schema, json::parse(text))) << text;
  }
}

}  // namespace
}  // namespace quench
