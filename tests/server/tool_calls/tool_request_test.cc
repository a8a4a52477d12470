// The tool fields of a chat request: the shapes OpenAI defines accepted, everything else a 400
// naming the field and what is allowed, and vLLM's rule that tool_choice "auto" (the default with
// tools) needs --enable-auto-tool-choice and a parser; a named function (or "required" with one
// tool) is forced with its parameters, without server flags.
#include "quench/server/tool_calls/tool_request.h"

#include <gtest/gtest.h>

#include "quench/server/api_error.h"

namespace quench {
namespace {

using Json = nlohmann::ordered_json;

const Json kTool = Json::parse(
    R"({"type": "function", "function": {"name": "get_weather", "description": "d",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})");

ToolServing enabled() {
  return {&tool_call_parser("hermes"), true};
}

// The message of the 400 that parsing `body` throws ("" when none).
std::string error_of(const Json& body, const ToolServing& serving = enabled()) {
  try {
    parse_tool_request(body, serving);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.what();
  }
  return "";
}

TEST(ToolRequest, ToolsAndChoices) {
  const ToolRequest none = parse_tool_request(Json::object(), enabled());
  EXPECT_TRUE(none.tools.is_null());
  EXPECT_EQ(none.parser, nullptr);
  // With tools, "auto" is the default: the output is parsed.
  const ToolRequest with = parse_tool_request({{"tools", {kTool}}}, enabled());
  EXPECT_EQ(with.tools, Json::array({kTool}));
  EXPECT_EQ(with.parser, &tool_call_parser("hermes"));
  EXPECT_TRUE(with.parallel_tool_calls);
  // "none" still shows the tools to the template, but nothing is parsed.
  const ToolRequest off = parse_tool_request(
      {{"tools", {kTool}}, {"tool_choice", "none"}, {"parallel_tool_calls", false}}, ToolServing{});
  EXPECT_EQ(off.tools, Json::array({kTool}));
  EXPECT_EQ(off.parser, nullptr);
  EXPECT_FALSE(off.parallel_tool_calls);
  // An empty list is no tools; the type may be left out (it can only be "function").
  EXPECT_TRUE(parse_tool_request({{"tools", Json::array()}}, ToolServing{}).tools.is_null());
  EXPECT_EQ(error_of({{"tools", {{{"function", {{"name", "f"}}}}}}}), "");
}

TEST(ToolRequest, BadShapesNameTheField) {
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(error_of({{"tools", "get_weather"}}), "'tools' must be a list"));
  EXPECT_TRUE(has(error_of({{"tools", {kTool, {{"type", "retrieval"}}}}}),
                  "tools[1].type must be \"function\""));
  EXPECT_TRUE(has(error_of({{"tools", {{{"type", "function"}}}}}), "tools[0].function must be"));
  EXPECT_TRUE(has(error_of({{"tools", {{{"type", "function"}, {"function", {{"name", ""}}}}}}}),
                  "tools[0].function.name must be a non-empty string"));
  EXPECT_TRUE(has(
      error_of({{"tools",
                 {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}}),
      "tools[0].function.parameters"));
  EXPECT_TRUE(has(error_of({{"tools", {kTool}}, {"tool_choice", "always"}}),
                  "\"none\", \"auto\", \"required\""));
  EXPECT_TRUE(has(error_of({{"tools", {kTool}}, {"parallel_tool_calls", "yes"}}),
                  "'parallel_tool_calls' must be true or false"));
  EXPECT_TRUE(has(error_of({{"tool_choice", "auto"}}), "needs 'tools'"));
}

TEST(ToolRequest, BadChoicesAndServerFlagsAreNamed) {
  const std::string auto_off = error_of({{"tools", {kTool}}}, ToolServing{});
  EXPECT_NE(auto_off.find("--enable-auto-tool-choice"), std::string::npos) << auto_off;
  EXPECT_NE(auto_off.find("--tool-call-parser"), std::string::npos) << auto_off;
  EXPECT_NE(error_of({{"tools", {kTool}}}, {&tool_call_parser("hermes"), false}), "");
  const std::string twice = error_of({{"tools", {kTool, kTool}}, {"tool_choice", "required"}});
  EXPECT_NE(twice.find("tools[0] and tools[1] are both named \"get_weather\""), std::string::npos)
      << twice;
  EXPECT_NE(error_of({{"tool_choice", "required"}}).find("needs 'tools'"), std::string::npos);
  const std::string unknown =
      error_of({{"tools", {kTool}},
                {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}});
  EXPECT_NE(unknown.find("\"get_time\", which is not in 'tools'"), std::string::npos) << unknown;
}

// A named function is forced with its name and parameters, "required" as a list of calls of the
// tools; neither takes the server's parser or needs a server flag.
TEST(ToolRequest, NamedFunctionsAndRequiredAreForced) {
  Json other = kTool;
  other["function"]["name"] = "get_time";
  other["function"].erase("parameters");
  const Json named = {
      {"tools", {kTool, other}},
      {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  for (const ToolServing& serving : {enabled(), ToolServing{}}) {
    const ToolRequest r = parse_tool_request(named, serving);
    EXPECT_EQ(r.forced_function, "get_weather");
    EXPECT_EQ(r.forced_parameters, nlohmann::json(kTool["function"]["parameters"]));
    EXPECT_EQ(r.parser, nullptr);
  }
  Json no_parameters = named;
  no_parameters["tool_choice"]["function"]["name"] = "get_time";
  const ToolRequest bare = parse_tool_request(no_parameters, ToolServing{});
  EXPECT_EQ(bare.forced_function, "get_time");
  EXPECT_TRUE(bare.forced_parameters.is_null());
  const ToolRequest required =
      parse_tool_request({{"tools", {kTool, other}}, {"tool_choice", "required"}}, ToolServing{});
  EXPECT_TRUE(required.forced_required);
  EXPECT_TRUE(required.forced_function.empty());
  EXPECT_EQ(required.parser, nullptr);
  EXPECT_FALSE(parse_tool_request(named, ToolServing{}).forced_required);
}

}  // namespace
}  // namespace quench
