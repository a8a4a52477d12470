// Request messages to template messages: tool calls with their arguments string parsed into an
// object (what HF templates print), tool results, null assistant content, and a 400 naming the
// message and field for each bad shape.
#include "quench/server/chat_messages.h"

#include <gtest/gtest.h>

#include "quench/server/api_error.h"

namespace quench {
namespace {

using Json = nlohmann::ordered_json;

std::string error_of(const Json& messages) {
  try {
    template_messages(messages);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.what();
  }
  return "";
}

TEST(ChatMessages, ToolCallsAndResults) {
  const Json in = Json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Weather "}, {"type": "text", "text": "?"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"zip\": \"75001\", \"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "21C"},
    {"role": "assistant", "tool_calls": []}])");
  const Json out = template_messages(in);
  EXPECT_EQ(out[0], (Json{{"role", "user"}, {"content", "Weather ?"}}));
  EXPECT_EQ(out[1]["content"], "");
  const Json& call = out[1]["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_1");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  // Parsed, in the order sent.
  EXPECT_EQ(call["function"]["arguments"].dump(), R"({"zip":"75001","city":"Paris"})");
  EXPECT_EQ(out[2], (Json{{"role", "tool"}, {"content", "21C"}, {"tool_call_id", "call_1"}}));
  EXPECT_FALSE(out[3].contains("tool_calls"));  // an empty list is no calls
}

TEST(ChatMessages, BadShapesNameTheMessageAndField) {
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"content": "x"}])")), "messages[0] needs a string"));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "user"}])")), "messages[0].content"));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "user", "content": 3}])")),
                  "messages[0].content must be"));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "user", "content": [{"type": "image"}]}])")),
                  "text only"));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "user", "content": "x", "tool_calls": []}])")),
                  "messages[0].tool_calls is only allowed in an assistant message"));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "assistant", "tool_calls": [{"function":
                   {"name": "f", "arguments": "{not json"}}]}])")),
                  "messages[0].tool_calls[0].function.arguments must be a string of JSON"));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "assistant", "tool_calls": [{"type": "x",
                   "function": {"name": "f"}}]}])")),
                  "messages[0].tool_calls[0].type must be \"function\""));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "assistant", "tool_calls": [{"function":
                   {"arguments": "{}"}}]}])")),
                  "messages[0].tool_calls[0].function.name"));
  EXPECT_TRUE(has(error_of(Json::parse(R"([{"role": "tool", "content": "x", "tool_call_id": 7}])")),
                  "messages[0].tool_call_id must be a string"));
}

}  // namespace
}  // namespace quench
