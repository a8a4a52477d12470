// Pythonic tool calls (Llama 3.2 and Llama 4 in their pythonic prompt form): the whole output is a
// Python list of calls with keyword arguments, [get_weather(city="Paris"), get_time()], the
// arguments Python literals (strings in either quote, numbers, True / False / None, lists,
// dicts with string keys), possibly between <|python_start|> and <|python_end|>. Each call's
// keyword arguments become its JSON arguments, in order. Output that does not start with '[' is
// plain content, and so is output that starts so but is not such a list.
#pragma once

#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {

class PythonicToolCallParser final : public ToolCallParser {
 public:
  std::vector<ToolCallSegment> scan(std::string_view text, bool final) const override;
};

}  // namespace quench
