// Mistral-style tool calls (Mistral-Nemo, Mistral Small 3, Magistral): the special token
// [TOOL_CALLS] after any content, then either a JSON list of {"name", "arguments"} objects
// (tokenizers before v11: [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]) or one call per
// marker as name[ARGS]{...} (v11 and later; v13's name[CALL_ID]id[ARGS]{...} too; name{...} as
// some v11 models write it). The output is
// decoded with special tokens shown, so that the marker is in the text (as vLLM's parser asks).
#pragma once

#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {

class MistralToolCallParser final : public ToolCallParser {
 public:
  std::vector<ToolCallSegment> scan(std::string_view text, bool final) const override;
  bool reads_special_tokens() const override { return true; }
  // Mistral's templates refuse a tool_call_id that is not nine letters and digits.
  std::string new_call_id() const override { return new_short_tool_call_id(); }
  // Longer ids keep their last nine characters (as vLLM shortens them for Mistral).
  std::string template_call_id(std::string_view id) const override {
    return std::string(id.size() > 9 ? id.substr(id.size() - 9) : id);
  }
};

}  // namespace quench
