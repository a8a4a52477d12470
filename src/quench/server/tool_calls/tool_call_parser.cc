#include "quench/server/tool_calls/tool_call_parser.h"

#include "quench/core/error.h"
#include "quench/server/tool_calls/call_text.h"
#include "quench/server/tool_calls/hermes_parser.h"
#include "quench/server/tool_calls/llama3_json_parser.h"
#include "quench/server/tool_calls/mistral_parser.h"
#include "quench/server/tool_calls/pythonic_parser.h"

namespace quench {

const ToolCallParser& tool_call_parser(std::string_view name) {
  static const HermesToolCallParser hermes;
  static const Llama3JsonToolCallParser llama3_json;
  static const MistralToolCallParser mistral;
  static const PythonicToolCallParser pythonic;
  if (name == "hermes") return hermes;
  if (name == "llama3_json") return llama3_json;
  if (name == "mistral") return mistral;
  if (name == "pythonic") return pythonic;
  throw Error(str_cat("unknown tool call parser '", name, "'; known: ", tool_call_parser_names()));
}

const char* tool_call_parser_names() {
  return "hermes, llama3_json, mistral, pythonic";
}

ToolCallOutput extract_tool_calls(const ToolCallParser& parser, std::string_view text,
                                  bool parallel_tool_calls) {
  const std::vector<ToolCallSegment> segments = parser.scan(text, true);
  ToolCallOutput out;
  for (const ToolCallSegment& s : segments) {
    if (s.call && (parallel_tool_calls || out.calls.empty()))
      out.calls.push_back({parser.new_call_id(), *s.call});
  }
  if (out.calls.empty()) {
    out.content = std::string(text);
    return out;
  }
  for (const ToolCallSegment& s : segments) {
    const std::string_view piece = text.substr(s.begin, s.end - s.begin);
    if (!s.call && !is_blank(piece)) out.content += piece;
  }
  out.content = std::string(trim_blank(out.content));
  return out;
}

}  // namespace quench
