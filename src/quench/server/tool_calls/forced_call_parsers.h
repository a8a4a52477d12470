// The output of a request whose tool_choice forces calls, read back as calls. Its text followed a
// schema (SamplingParams::json_schema, set from the tools), so the whole finished text is the
// calls:
//  - ForcedFunctionParser (tool_choice naming a function): the text is that function's
//    arguments, one JSON object: one call;
//  - RequiredCallsParser (tool_choice "required"): the text is a JSON list of {"name": ...,
//    "parameters": {...}} (vLLM's form, required_calls_schema): one call each.
// Nothing is a call before the text is final (the stream sends the calls, arguments in one piece,
// when the output ends); text that is not of that form (cut short by max_tokens) is content, as a
// call that cannot be read is shown, never dropped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {

class ForcedFunctionParser final : public ToolCallParser {
 public:
  explicit ForcedFunctionParser(std::string name) : name_(std::move(name)) {}
  std::vector<ToolCallSegment> scan(std::string_view text, bool final) const override;

 private:
  std::string name_;
};

class RequiredCallsParser final : public ToolCallParser {
 public:
  std::vector<ToolCallSegment> scan(std::string_view text, bool final) const override;
};

// The schema of tool_choice "required" over `tools` (the request's checked list): a list of at
// least one call (at most one without parallel_tool_calls), each {"name": one tool's name,
// "parameters": its parameters}, told apart by the name (a tagged union). Each tool's $defs move
// to the list's $defs under "TOOL_INDEX.NAME", with its $refs rewritten to match, so that every
// reference resolves in the one document.
nlohmann::json required_calls_schema(const nlohmann::ordered_json& tools, bool parallel_tool_calls);

}  // namespace quench
