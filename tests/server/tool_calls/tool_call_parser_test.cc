// The tool-call parsers on what models write: well-formed calls, several calls, calls mixed with
// text, and malformed call text, which stays plain content (the whole text) rather than failing.
#include "quench/server/tool_calls/tool_call_parser.h"

#include <gtest/gtest.h>

#include "harness/expect_error.h"

namespace quench {
namespace {

const ToolCallParser& hermes() {
  return tool_call_parser("hermes");
}
const ToolCallParser& llama3() {
  return tool_call_parser("llama3_json");
}

std::vector<std::pair<std::string, std::string>> names_and_arguments(const ToolCallOutput& out) {
  std::vector<std::pair<std::string, std::string>> calls;
  for (const ToolCall& c : out.calls)
    calls.emplace_back(c.function.name, c.function.arguments);
  return calls;
}

using Calls = std::vector<std::pair<std::string, std::string>>;

TEST(ToolCallParser, HermesOneCall) {
  const ToolCallOutput out =
      extract_tool_calls(hermes(),
                         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                         "\"Paris\"}}\n</tool_call>",
                         true);
  EXPECT_EQ(names_and_arguments(out), (Calls{{"get_weather", R"({"city":"Paris"})"}}));
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.calls.size(), 1u);
  const std::string& id = out.calls[0].id;
  EXPECT_EQ(id.rfind("chatcmpl-tool-", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("chatcmpl-tool-").size() + 32) << id;
}

TEST(ToolCallParser, HermesSeveralCallsAndTheTextAroundThem) {
  const std::string text =
      "Let me check both.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": "
      "\"CET\", \"format\": \"24h\"}}\n</tool_call>\nDone.";
  const ToolCallOutput out = extract_tool_calls(hermes(), text, true);
  // The model's key order is kept in the arguments.
  EXPECT_EQ(names_and_arguments(out), (Calls{{"get_weather", R"({"city":"Paris"})"},
                                             {"get_time", R"({"tz":"CET","format":"24h"})"}}));
  EXPECT_EQ(out.content, "Let me check both.\n\n\nDone.");
  EXPECT_NE(out.calls[0].id, out.calls[1].id);
  // parallel_tool_calls = false keeps the first call only.
  EXPECT_EQ(names_and_arguments(extract_tool_calls(hermes(), text, false)),
            (Calls{{"get_weather", R"({"city":"Paris"})"}}));
}

TEST(ToolCallParser, HermesMalformedCallsStayContent) {
  for (const std::string& text : std::vector<std::string>{
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",  // bad JSON
           "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                         // no name
           "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",  // not an object
           "<tool_call>\n[\"f\"]\n</tool_call>",
           // One good call and one bad: all of it is content, nothing is half-called.
           "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call><tool_call>{\"name\": "
           "\"g\", </tool_call>",
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\"",  // cut off mid-call
           // Arguments nested past the limit (128): not a call, and nothing recurses that deep.
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(50000, '[') +
               std::string(50000, ']') + "}}</tool_call>",
       }) {
    SCOPED_TRACE(text);
    const ToolCallOutput out = extract_tool_calls(hermes(), text, true);
    EXPECT_TRUE(out.calls.empty());
    EXPECT_EQ(out.content, text);
  }
}

TEST(ToolCallParser, ArgumentsNestedToTheLimitAreKept) {
  // The call object, its arguments and 126 arrays: 128 levels.
  const std::string deep = std::string(126, '[') + std::string(126, ']');
  const ToolCallOutput out = extract_tool_calls(
      hermes(), "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + deep + "}}</tool_call>",
      true);
  EXPECT_EQ(names_and_arguments(out), (Calls{{"f", "{\"a\":" + deep + "}"}}));
}

TEST(ToolCallParser, HermesEdgeCases) {
  // Plain text, even with angle brackets, is content as it is.
  EXPECT_EQ(extract_tool_calls(hermes(), "a < b and <tool> x\n", true).content,
            "a < b and <tool> x\n");
  // A last block the model did not close counts when its JSON is whole.
  EXPECT_EQ(names_and_arguments(extract_tool_calls(
                hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n", true)),
            (Calls{{"f", R"({"x":1})"}}));
  // Absent arguments are {}; double-encoded ones are read through.
  EXPECT_EQ(names_and_arguments(extract_tool_calls(
                hermes(),
                "<tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\", "
                "\"arguments\": \"{\\\"x\\\": 2}\"}</tool_call>",
                true)),
            (Calls{{"f", "{}"}, {"g", R"({"x":2})"}}));
  // Growing text: a possible marker start at the end is held back, an open call left out.
  const auto partial = hermes().scan("Hi <tool_", false);
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_EQ(partial[0].end, 3u);
  const auto open = hermes().scan("Hi <tool_call>{\"name\": \"f\"", false);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_FALSE(open[0].call);
}

TEST(ToolCallParser, Llama3JsonCalls) {
  EXPECT_EQ(
      names_and_arguments(extract_tool_calls(
          llama3(), "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", true)),
      (Calls{{"get_weather", R"({"city":"Paris"})"}}));
  const ToolCallOutput two = extract_tool_calls(
      llama3(),
      " <|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"x;y\"}}; {\"name\": \"g\", "
      "\"arguments\": {\"b\": {\"c\": [1, 2]}}}\n",
      true);
  EXPECT_EQ(names_and_arguments(two),
            (Calls{{"f", R"({"a":"x;y"})"}, {"g", R"({"b":{"c":[1,2]}})"}}));
  EXPECT_EQ(two.content, "");
}

TEST(ToolCallParser, Llama3JsonNonCallsStayContent) {
  for (const std::string text : {
           "The answer is 4.",
           "{\"answer\": 4}",                                           // JSON, but not a call
           "{\"name\": \"f\", \"parameters\": {}} and then some text",  // not all calls
           "{\"name\": \"f\", \"parameters\": {}}; {\"name\": ",        // cut off
           "<|python_tag|>",
           "",
       }) {
    SCOPED_TRACE(text);
    const ToolCallOutput out = extract_tool_calls(llama3(), text, true);
    EXPECT_TRUE(out.calls.empty());
    EXPECT_EQ(out.content, text);
  }
  // While the output may still become a call, nothing is shown.
  EXPECT_TRUE(llama3().scan("  <|pyth", false).empty());
  EXPECT_TRUE(llama3().scan("{\"name\": \"f\", \"para", false).empty());
  EXPECT_EQ(llama3().scan("Sure", false).size(), 1u);
}

const ToolCallParser& mistral() {
  return tool_call_parser("mistral");
}

TEST(ToolCallParser, MistralListsOfCalls) {
  // Tokenizers before v11: one marker, then a JSON list (Mistral-Nemo adds an "id" to each).
  const ToolCallOutput one = extract_tool_calls(
      mistral(), "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
      true);
  EXPECT_EQ(names_and_arguments(one), (Calls{{"get_weather", R"({"city":"Paris"})"}}));
  EXPECT_EQ(one.content, "");
  // Ids as Mistral's templates take them back: nine letters and digits.
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].id.size(), 9u);
  EXPECT_EQ(one.calls[0].id.find_first_not_of(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
            std::string::npos)
      << one.calls[0].id;
  const ToolCallOutput two = extract_tool_calls(
      mistral(),
      "Let me look.[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": \"]}\"}, \"id\": "
      "\"a1B2c3D4e\"},\n {\"name\": \"g\", \"arguments\": \"{\\\"b\\\": 2}\"}]",
      true);
  EXPECT_EQ(names_and_arguments(two), (Calls{{"f", R"({"a":"]}"})"}, {"g", R"({"b":2})"}}));
  EXPECT_EQ(two.content, "Let me look.");
  EXPECT_TRUE(mistral().reads_special_tokens());
  EXPECT_FALSE(hermes().reads_special_tokens());
}

TEST(ToolCallParser, MistralNamedCalls) {
  // v11 and later: name[ARGS]{...} after each marker; v13 puts [CALL_ID]id before [ARGS]; some
  // v11 models write name{...}.
  const ToolCallOutput out = extract_tool_calls(
      mistral(),
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[CALL_ID]x9Y8z7W6v"
      "[ARGS] {\"tz\": \"CET\", \"format\": \"24h\"}[TOOL_CALLS]noop{}",
      true);
  EXPECT_EQ(names_and_arguments(out), (Calls{{"get_weather", R"({"city":"Paris"})"},
                                             {"get_time", R"({"tz":"CET","format":"24h"})"},
                                             {"noop", "{}"}}));
  EXPECT_EQ(out.content, "");
  // Ids from elsewhere keep their last nine characters for Mistral's templates.
  EXPECT_EQ(mistral().template_call_id("chatcmpl-tool-0123456789abcdef"), "789abcdef");
  EXPECT_EQ(mistral().template_call_id("a1B2c3D4e"), "a1B2c3D4e");
  EXPECT_EQ(hermes().template_call_id("chatcmpl-tool-0123456789abcdef"),
            "chatcmpl-tool-0123456789abcdef");
}

TEST(ToolCallParser, MistralNonCallsStayContent) {
  for (const std::string text : {
           "The answer is 4 [not a marker].",
           "[TOOL_CALLS]",                                               // nothing after it
           "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": }}]",  // bad JSON
           "[TOOL_CALLS][1, 2]",                                         // not call objects
           "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}",          // cut off
           "[TOOL_CALLS]f[ARGS]not json",                                // named, bad args
           "[TOOL_CALLS]f(\"a\")",                                       // not JSON
           "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}} {\"name\": \"g\"}]",  // no comma
       }) {
    SCOPED_TRACE(text);
    const ToolCallOutput out = extract_tool_calls(mistral(), text, true);
    EXPECT_TRUE(out.calls.empty());
    EXPECT_EQ(out.content, text);
  }
  // While the output may still become a call, it is held back; text before it is not.
  EXPECT_EQ(mistral().scan("Sure[TOOL_C", false).size(), 1u);
  EXPECT_EQ(mistral().scan("Sure[TOOL_C", false)[0].end, 4u);
  EXPECT_EQ(mistral().scan("Sure[TOOL_CALLS]get_wea", false).size(), 1u);
  EXPECT_EQ(mistral().scan("Sure[TOOL_CALLS]f[CALL_", false).size(), 1u);
  EXPECT_EQ(mistral().scan("Sure[TOOL_CALLS]f[AR", false).size(), 1u);
  EXPECT_EQ(mistral().scan("Sure[TOOL_CALLS][{\"name\": \"f\", \"a", false).size(), 1u);
}

const ToolCallParser& pythonic() {
  return tool_call_parser("pythonic");
}

TEST(ToolCallParser, PythonicCalls) {
  const ToolCallOutput out = extract_tool_calls(
      pythonic(),
      " [get_weather(city='Paris', days=3, metric=True), noop(),\n"
      "  search(q=\"it's \\\"x\\\"\\n\\u00e9\", filters={'tags': ['a', \"b\"], 'max': -1.5e2, "
      "'any': None})]\n",
      true);
  EXPECT_EQ(names_and_arguments(out),
            (Calls{{"get_weather", R"({"city":"Paris","days":3,"metric":true})"},
                   {"noop", "{}"},
                   {"search",
                    "{\"q\":\"it's \\\"x\\\"\\n\xC3\xA9\",\"filters\":{\"tags\":[\"a\","
                    "\"b\"],\"max\":-150.0,\"any\":null}}"}}));
  EXPECT_EQ(out.content, "");
  EXPECT_EQ(names_and_arguments(
                extract_tool_calls(pythonic(), "<|python_start|>[f(a=1)]<|python_end|>", true)),
            (Calls{{"f", R"({"a":1})"}}));
}

TEST(ToolCallParser, PythonicNonCallsStayContent) {
  for (const std::string text : {
           "The answer is [4].",
           "[1, 2, 3]",               // a list, not of calls
           "[]",                      // no calls
           "[f(1)]",                  // positional arguments are not the form
           "[f(a=1, a=2)]",           // a keyword twice
           "[f(a=x)]",                // a name, not a literal
           "[f(a='open)]",            // an unclosed string
           "[f(a=1)] and then text",  // not the whole output
           "[f(a=1)",                 // cut off
       }) {
    SCOPED_TRACE(text);
    const ToolCallOutput out = extract_tool_calls(pythonic(), text, true);
    EXPECT_TRUE(out.calls.empty());
    EXPECT_EQ(out.content, text);
  }
  // While the output may still be a call list, nothing is shown; plain text streams at once.
  EXPECT_TRUE(pythonic().scan("[get_weather(city='Pa", false).empty());
  EXPECT_TRUE(pythonic().scan("[f(a=1)]", false).empty());  // text may still follow
  EXPECT_TRUE(pythonic().scan("<|python_st", false).empty());
  EXPECT_EQ(pythonic().scan("Sure", false).size(), 1u);
}

TEST(ToolCallParser, UnknownNameListsTheKnownOnes) {
  EXPECT_QUENCH_ERROR(tool_call_parser("granite"),
                      {"granite", "hermes", "llama3_json", "mistral", "pythonic"});
}

}  // namespace
}  // namespace quench
