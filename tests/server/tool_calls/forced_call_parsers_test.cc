// Forced calls: "required"'s schema (a list of {"name", "parameters"} calls, told apart by the
// name, each tool's $defs and $refs moved into the one document) admits exactly the calls of the
// tools, and the parsers read a finished output back as calls, or as content when it is not of
// their form.
#include "quench/server/tool_calls/forced_call_parsers.h"

#include <gtest/gtest.h>

#include "quench/engine/structured_output/json_schema_prefix.h"

namespace quench {
namespace {

using Json = nlohmann::ordered_json;

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "plan",
    "parameters": {"type": "object", "$defs": {"Step": {"type": "object",
                     "properties": {"do": {"type": "string"}, "then": {"$ref": "#/$defs/Step"}},
                     "required": ["do"], "additionalProperties": false}},
                   "properties": {"first": {"$ref": "#/$defs/Step"}}, "required": ["first"],
                   "additionalProperties": false}}},
  {"function": {"name": "now"}}])");

bool admitted(const JsonSchema& schema, const std::string& text) {
  JsonSchemaPrefix p(schema);
  return p.feed(text) && p.complete();
}

TEST(RequiredCallsSchema, AdmitsCallsOfTheTools) {
  const auto schema = JsonSchema::compile(required_calls_schema(kTools, true));
  EXPECT_TRUE(admitted(*schema, R"([{"name": "get_weather", "parameters": {"city": "Oslo"}}])"));
  EXPECT_TRUE(admitted(*schema, R"([{"name": "plan", "parameters": {"first": {"do": "a",
      "then": {"do": "b"}}}}, {"name": "now", "parameters": {"any": [1]}}])"));
  EXPECT_FALSE(admitted(*schema, "[]"));                                           // one at least
  EXPECT_FALSE(admitted(*schema, R"([{"name": "get_time", "parameters": {}}])"));  // not a tool
  EXPECT_FALSE(admitted(*schema, R"([{"name": "get_weather", "parameters": {}}])"));  // no city
  EXPECT_FALSE(admitted(*schema, R"([{"parameters": {}, "name": "now"}])"));  // the name first
  EXPECT_FALSE(admitted(*schema, R"([{"name": "plan", "parameters": {"first": {"then": 1}}}])"));
  const auto one = JsonSchema::compile(required_calls_schema(kTools, false));
  EXPECT_TRUE(admitted(*one, R"([{"name": "now", "parameters": {}}])"));
  EXPECT_FALSE(
      admitted(*one, R"([{"name": "now", "parameters": {}}, {"name": "now", "parameters": {}}])"));
}

TEST(ForcedCallParsers, ReadFinishedOutputsAsCalls) {
  const RequiredCallsParser required;
  EXPECT_TRUE(required.scan(R"([{"name": "now", "parameters": {}})", false).empty());
  const auto calls = required.scan(
      R"( [{"name": "get_weather", "parameters": {"city": "Oslo"}}, {"name": "now", "parameters": {}}])",
      true);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].call->name, "get_weather");
  EXPECT_EQ(calls[0].call->arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(calls[1].call->name, "now");
  EXPECT_EQ(calls[1].call->arguments, "{}");
  for (const char* cut : {R"([{"name": "now", "param)", "[]", R"([{"name": "now"}])"}) {
    const auto content = required.scan(cut, true);
    ASSERT_EQ(content.size(), 1u) << cut;
    EXPECT_FALSE(content[0].call.has_value()) << cut;
  }
  const ForcedFunctionParser named("get_weather");
  EXPECT_TRUE(named.scan(R"({"city": "Oslo"})", false).empty());
  const auto call = named.scan("\n{\"city\": \"Oslo\"} ", true);
  ASSERT_EQ(call.size(), 1u);
  EXPECT_EQ(call[0].call->name, "get_weather");
  EXPECT_EQ(call[0].call->arguments, R"({"city": "Oslo"})");
  EXPECT_FALSE(named.scan(R"({"city": "Os)", true)[0].call.has_value());
}

}  // namespace
}  // namespace quench
