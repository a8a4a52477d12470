// Streaming tool calls: text fed as it grows (byte by byte, the worst case) gives content deltas
// that never show call text and whole calls as they complete, adding up to what the whole
// response says, and plain text streams through unchanged.
#include "quench/server/tool_calls/tool_call_streamer.h"

#include <gtest/gtest.h>

namespace quench {
namespace {

using nlohmann::json;

struct Streamed {
  std::string content;
  std::vector<std::string> deltas;  // the content deltas, in order
  json calls = json::array();
  bool called = false;
};

Streamed stream(const std::string& parser, const std::string& text, bool parallel = true) {
  ToolCallStreamer s(tool_call_parser(parser), parallel);
  Streamed out;
  auto take = [&](ToolCallStreamer::Delta d) {
    if (!d.content.empty()) out.deltas.push_back(d.content);
    out.content += d.content;
    for (json& c : d.tool_calls)
      out.calls.push_back(std::move(c));
  };
  for (size_t n = 1; n <= text.size(); ++n)
    take(s.update(std::string_view(text).substr(0, n), false));
  take(s.update(text, true));
  out.called = s.called();
  return out;
}

void expect_like_the_whole_response(const std::string& parser, const std::string& text) {
  SCOPED_TRACE(parser + ": " + text);
  const Streamed s = stream(parser, text);
  const ToolCallOutput whole = extract_tool_calls(tool_call_parser(parser), text, true);
  EXPECT_EQ(s.content, whole.content);
  ASSERT_EQ(s.calls.size(), whole.calls.size());
  EXPECT_EQ(s.called, !whole.calls.empty());
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    EXPECT_EQ(s.calls[i]["index"], i);
    EXPECT_EQ(s.calls[i]["type"], "function");
    // The parser's id form (the whole response's ids are fresh ones of the same form).
    EXPECT_EQ(s.calls[i]["id"].get<std::string>().size(), whole.calls[i].id.size());
    EXPECT_EQ(s.calls[i]["id"].get<std::string>().starts_with("chatcmpl-tool-"),
              whole.calls[i].id.starts_with("chatcmpl-tool-"));

    EXPECT_EQ(s.calls[i]["function"]["name"], whole.calls[i].function.name);
    EXPECT_EQ(s.calls[i]["function"]["arguments"], whole.calls[i].function.arguments);
  }
  for (const std::string& d : s.deltas) {
    EXPECT_EQ(d.find("<tool"), std::string::npos) << d;
    if (!whole.calls.empty()) {
      EXPECT_EQ(d.find("[TOOL_CALLS]"), std::string::npos) << d;
    }
    EXPECT_EQ(d.find("{\"name\""), std::string::npos) << d;
  }
}

TEST(ToolCallStreamer, AddsUpToTheWholeResponse) {
  expect_like_the_whole_response("hermes", "Plain text, kept as is < even > this.\n\n");
  expect_like_the_whole_response(
      "hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"}{\"}}\n</tool_call>");
  expect_like_the_whole_response(
      "hermes",
      "Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"g\", \"arguments\": {\"x\": [1]}}\n</tool_call>\n");
  expect_like_the_whole_response("hermes", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  expect_like_the_whole_response("llama3_json", "Just words.");
  expect_like_the_whole_response("llama3_json",
                                 "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}; "
                                 "{\"name\": \"g\", \"parameters\": {}}");
  expect_like_the_whole_response("llama3_json", "{\"answer\": 42}");
  expect_like_the_whole_response("mistral", "No calls [here], just [TOOL_ text.");
  expect_like_the_whole_response(
      "mistral",
      "Checking.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": \"[ARGS]\"}}, "
      "{\"name\": \"g\", \"arguments\": {}}]");
  expect_like_the_whole_response("mistral",
                                 "[TOOL_CALLS]f[ARGS]{\"a\": 1}[TOOL_CALLS]g[CALL_ID]abc[ARGS]{}");
  expect_like_the_whole_response("mistral", "[TOOL_CALLS]f[ARGS]{\"a\": oops}");
  expect_like_the_whole_response("pythonic", "[f(a='x', b=[1, {'c': None}]), g()]");
  expect_like_the_whole_response("pythonic", "[f(a=1)] and more");
  expect_like_the_whole_response("pythonic", "Plain words.");
}

TEST(ToolCallStreamer, CallsArriveWhenComplete) {
  ToolCallStreamer s(tool_call_parser("hermes"), true);
  EXPECT_EQ(s.update("Hi <tool_c", false).content, "Hi");
  const ToolCallStreamer::Delta open = s.update("Hi <tool_call>{\"name\": \"f\", ", false);
  EXPECT_TRUE(open.content.empty());
  EXPECT_TRUE(open.tool_calls.empty());
  const ToolCallStreamer::Delta done =
      s.update("Hi <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", false);
  ASSERT_EQ(done.tool_calls.size(), 1u);
  EXPECT_EQ(done.tool_calls[0]["function"]["name"], "f");
  EXPECT_TRUE(s.called());
  // The blank held back before the call is dropped, not sent late.
  EXPECT_EQ(
      s.update("Hi <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", true).content, "");
}

TEST(ToolCallStreamer, MalformedCallTextIsShownAsContent) {
  const std::string bad = "<tool_call>{\"name\": oops}</tool_call> after";
  const Streamed s = stream("hermes", bad);
  EXPECT_EQ(s.content, bad);
  EXPECT_FALSE(s.called);
}

TEST(ToolCallStreamer, OnlyTheFirstCallWithoutParallelToolCalls) {
  const Streamed s = stream("llama3_json",
                            "{\"name\": \"f\", \"parameters\": {}};{\"name\": \"g\", "
                            "\"parameters\": {}}",
                            false);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0]["function"]["name"], "f");
}

}  // namespace
}  // namespace quench
