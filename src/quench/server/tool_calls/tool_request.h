// The tool fields of a chat request, checked: tools (OpenAI's [{"type": "function", "function":
// {name, description, parameters}}]), tool_choice and parallel_tool_calls, with vLLM's rules:
// tool_choice defaults to "auto" when there are tools, and "auto" needs the server started with
// --enable-auto-tool-choice and --tool-call-parser. A named function ({"type": "function",
// "function": {"name": ...}}) or "required" forces calls with no server flag: the output follows
// a schema (structured output) and is read back by forced_call_parsers.h: a named function's
// arguments under its parameters, or for "required" a list of {"name", "parameters"} calls of
// the tools (vLLM's form).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {

// How the server was started for tools.
struct ToolServing {
  const ToolCallParser* parser = nullptr;  // --tool-call-parser; null: none
  bool enable_auto_tool_choice = false;    // --enable-auto-tool-choice
};

struct ToolRequest {
  // The template's `tools`: the request's list as sent (key order kept), or null. With
  // tool_choice "none" the tools still reach the template (vLLM's default); the output is then
  // not parsed for calls.
  nlohmann::ordered_json tools;
  const ToolCallParser* parser = nullptr;  // set when calls are parsed from the output ("auto")
  bool parallel_tool_calls = true;
  // A forced function: its name (empty: none) and its parameters schema (null: any object).
  std::string forced_function;
  nlohmann::json forced_parameters;
  // tool_choice "required": the output is a list of calls of `tools`.
  bool forced_required = false;
};

// Throws ApiError (400) naming the bad field and the allowed values.
ToolRequest parse_tool_request(const nlohmann::ordered_json& body, const ToolServing& serving);

}  // namespace quench
