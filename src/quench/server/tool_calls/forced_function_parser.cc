#include "quench/server/tool_calls/forced_function_parser.h"

#include <nlohmann/json.hpp>

#include "quench/server/tool_calls/call_text.h"

namespace quench {

std::vector<ToolCallSegment> ForcedFunctionParser::scan(std::string_view text, bool final) const {
  if (!final) return {};
  const std::string_view arguments = trim_blank(text);
  const nlohmann::json value = nlohmann::json::parse(arguments, nullptr, false);
  if (value.is_discarded() || !value.is_object()) return {{0, text.size(), std::nullopt}};
  return {{0, text.size(), FunctionCall{name_, std::string(arguments)}}};
}

}  // namespace quench
