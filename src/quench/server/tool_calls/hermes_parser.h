// Hermes-style tool calls (Qwen2.5, Qwen3, Hermes 2/3): each call a JSON object
// {"name": ..., "arguments": {...}} between <tool_call> and </tool_call>, anywhere in the output
// and any number of times. A last block the model did not close (it stopped at end of turn) still
// counts when its JSON is complete, as vLLM's parser has it.
#pragma once

#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {

class HermesToolCallParser final : public ToolCallParser {
 public:
  std::vector<ToolCallSegment> scan(std::string_view text, bool final) const override;
};

}  // namespace quench
