// The output of a request whose tool_choice names a function (or is "required" with one tool):
// its text is that function's arguments, a JSON object the function's parameters schema forced
// (SamplingParams::json_schema), so the whole finished text is one call. Nothing is a call before
// the text is final (the stream sends the call, arguments in one piece, when the output ends);
// text that is not one JSON object (cut short by max_tokens) is content, as a call that cannot be
// read is shown, never dropped.
#pragma once

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

}  // namespace quench
