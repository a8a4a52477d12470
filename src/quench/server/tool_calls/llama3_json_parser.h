// Llama 3.1 / 3.2 JSON tool calls: the whole output is one or more JSON objects
// {"name": ..., "parameters": {...}} ("arguments" also read) separated by ';', possibly after
// <|python_tag|> (a special token, so usually already skipped by decoding). Output that does not
// start with '{' or the tag is plain content; output that starts so but is not all calls is plain
// content too.
#pragma once

#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {

class Llama3JsonToolCallParser final : public ToolCallParser {
 public:
  std::vector<ToolCallSegment> scan(std::string_view text, bool final) const override;
};

}  // namespace quench
