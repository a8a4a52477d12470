// Structured output's allOf of several schemas: the merged schema admits a text exactly where
// every part, compiled alone, admits it (checked over every object of up to two of three keys
// with nine kinds of value, for compositions of each merged keyword); what cannot be merged
// exactly is refused by name; and on the engine a composed model's outputs carry every part's
// required keys.
#include "quench/engine/structured_output/schema_all_of.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/structured_output_checks.h"
#include "harness/tiny_engine.h"
#include "quench/core/error.h"
#include "quench/engine/llm_engine.h"
#include "quench/engine/structured_output/json_schema.h"

namespace quench {
namespace {

using nlohmann::json;
using testing_support::admits_whole;

// Every object of at most two distinct keys among a, b, c, each with one of nine values.
std::vector<std::string> small_objects() {
  return testing_support::objects_of_two_keys_at_most(
      {"a", "b", "c"}, {"1", "-2", "3.5", "\"x\"", "\"xyz\"", "null", "true", "[1]", "{}"});
}

// The document with `parts` as its allOf, and each part alone (sharing the document's $defs).
void expect_merge_is_intersection(const json& parts, const json& defs = json::object()) {
  json whole = {{"allOf", parts}};
  if (!defs.empty()) whole["$defs"] = defs;
  const auto merged = JsonSchema::compile(whole);
  std::vector<std::shared_ptr<const JsonSchema>> alone;
  for (json part : parts) {
    if (!defs.empty()) part["$defs"] = defs;
    alone.push_back(JsonSchema::compile(part));
  }
  int admitted = 0, refused = 0;
  for (const std::string& text : small_objects()) {
    bool every = true;
    for (const auto& part : alone)
      every = every && admits_whole(*part, text);
    EXPECT_EQ(admits_whole(*merged, text), every) << parts.dump() << " on " << text;
    (every ? admitted : refused) += 1;
  }
  // Not vacuous: the parts together admit some texts and refuse others.
  EXPECT_GT(admitted, 0) << parts.dump();
  EXPECT_GT(refused, 0) << parts.dump();
}

TEST(SchemaAllOf, TheMergeAdmitsWhatEveryPartAdmits) {
  // OpenAPI composition: a base model and an extension, each with required keys.
  expect_merge_is_intersection(json::parse(R"([
      {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
      {"type": "object", "properties": {"b": {"type": "string", "maxLength": 1}},
       "required": ["b"]}])"));
  // additionalProperties false in one part forbids the other part's extra keys.
  expect_merge_is_intersection(json::parse(R"([
      {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": false},
      {"type": "object", "properties": {"b": {"type": "number"}, "c": {"type": "null"}}}])"));
  // One property's schemas met: types (integer within number, nullable), bounds.
  expect_merge_is_intersection(json::parse(R"([
      {"type": "object", "properties": {"a": {"type": ["number", "null"], "minimum": -2}}},
      {"type": "object", "properties": {"a": {"type": ["integer", "string"], "maximum": 0.5}}}])"));
  // enum against enum, and against another part's types.
  expect_merge_is_intersection(json::parse(R"([
      {"type": "object", "properties": {"a": {"enum": [1, "x", null, true]}}},
      {"type": "object", "properties": {"a": {"enum": ["x", true, 3.5]}}},
      {"type": "object", "additionalProperties": {"type": ["boolean", "string"]}}])"));
  // Bounds from three parts, exclusive beside inclusive.
  expect_merge_is_intersection(json::parse(R"([
      {"type": "object", "additionalProperties": {"minimum": -2}},
      {"type": "object", "additionalProperties": {"exclusiveMinimum": -2}},
      {"type": "object", "additionalProperties": {"maximum": 3.5}}])"));
  // One keyword in several parts: the tightest bound.
  expect_merge_is_intersection(json::parse(R"([
      {"type": "object", "additionalProperties": {"maximum": 3.5, "minimum": -2}},
      {"type": "object", "additionalProperties": {"maximum": 1, "minimum": 0}},
      {"type": "object", "additionalProperties": {"maxLength": 1}},
      {"type": "object", "additionalProperties": {"maxLength": 3}}])"));
  // anyOf in one part, distributed over another part's types.
  expect_merge_is_intersection(json::parse(R"([
      {"type": "object", "additionalProperties":
        {"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer"}]}},
      {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"],
                                                   "maxLength": 2}}])"));
  // $ref parts and a nested allOf; property counts.
  expect_merge_is_intersection(json::parse(R"([
      {"$ref": "#/$defs/Base"},
      {"type": "object", "allOf": [{"maxProperties": 1},
                                   {"properties": {"c": {"type": "array"}}}]}])"),
                               json::parse(R"({"Base": {"type": "object",
      "properties": {"a": {"type": "integer"}}, "minProperties": 1}})"));
}

void expect_compile_error(const json& schema, const std::string& needle) {
  try {
    JsonSchema::compile(schema);
    ADD_FAILURE() << "compiled: " << schema.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SchemaAllOf, WhatCannotBeMergedExactlyIsRefusedByName) {
  const json object = {{"type", "object"}};
  auto property = [&](const json& a, const json& b) {
    return json{{"type", "object"},
                {"properties", {{"p", {{"allOf", {a, b}}}}}},
                {"additionalProperties", false}};
  };
  expect_compile_error(property({{"pattern", "^a"}}, {{"pattern", "b$"}}),
                       "#/properties/p/allOf/1: allOf's parts give 'pattern' different values");
  expect_compile_error(property({{"format", "date"}}, {{"format", "uuid"}}), "'format'");
  expect_compile_error(property({{"multipleOf", 2}}, {{"multipleOf", 3}}), "'multipleOf'");
  expect_compile_error(property({{"type", "string"}}, {{"type", "integer"}}),
                       "#/properties/p: allOf's parts admit no common value");
  expect_compile_error(property({{"const", 1}}, {{"enum", {2, 3}}}), "admit no common value");
  // A required key that another part forbids.
  expect_compile_error({{"allOf",
                         {{{"type", "object"},
                           {"properties", {{"a", json::object()}}},
                           {"additionalProperties", false}},
                          {{"required", {"b"}}}}}},
                       "required property 'b' is one another part forbids");
  // A property that meets nothing while other keys stay allowed cannot be left out.
  expect_compile_error({{"allOf",
                         {{{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}},
                          {{"properties", {{"a", {{"type", "null"}}}}}}}}},
                       "admit no common value for this property");
  // Two recursive models merged into each other.
  const json defs = {
      {"A", {{"type", "object"}, {"properties", {{"next", {{"$ref", "#/$defs/A"}}}}}}},
      {"B", {{"type", "object"}, {"properties", {{"next", {{"$ref", "#/$defs/B"}}}}}}}};
  expect_compile_error(
      {{"$defs", defs}, {"allOf", {{{"$ref", "#/$defs/A"}}, {{"$ref", "#/$defs/B"}}}}},
      "nest deeper than 32 levels");
  // ... while a recursive model with another part's keywords merges.
  const auto linked = JsonSchema::compile(
      {{"$defs", defs}, {"allOf", {{{"$ref", "#/$defs/A"}}, {{"required", {"next"}}}}}});
  EXPECT_TRUE(admits_whole(*linked, R"({"next": {"next": {}}})"));
  EXPECT_FALSE(admits_whole(*linked, R"({})"));
}

TEST(SchemaAllOf, EngineOutputsCarryEveryPartsRequiredKeys) {
  LlmEngine engine(testing_support::tiny_engine_options(
      testing_support::tiny_model_dir("quench_schema_all_of_test", "engine")));
  const json schema = {
      {"$defs",
       {{"Base",
         {{"type", "object"},
          {"properties", {{"id", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}}}},
          {"required", {"id"}}}}}},
      {"allOf",
       {{{"$ref", "#/$defs/Base"}},
        {{"properties", {{"id", json::object()}, {"ok", {{"type", "boolean"}}}}},
         {"required", {"ok"}},
         {"additionalProperties", false}}}}};
  SamplingParams params = testing_support::greedy(128);
  params.json_schema = JsonSchema::compile(schema);
  for (const auto& [text, finish] :
       testing_support::greedy_and_sampled_outputs(engine, params, 5)) {
    ASSERT_EQ(finish, FinishReason::kStop) << json(text).dump();
    const json value = json::parse(text);
    EXPECT_EQ(value.size(), 2u) << text;  // additionalProperties false: id and ok only
    ASSERT_TRUE(value.contains("id") && value.contains("ok")) << text;
    EXPECT_TRUE(value["ok"].is_boolean()) << text;
    EXPECT_GE(value["id"].get<int64_t>(), 0) << text;
    EXPECT_LE(value["id"].get<int64_t>(), 99) << text;
  }
}

}  // namespace
}  // namespace quench
