#include "quench/server/tool_calls/llama3_json_parser.h"

#include "quench/server/tool_calls/call_text.h"

namespace quench {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

}  // namespace

std::vector<ToolCallSegment> Llama3JsonToolCallParser::scan(std::string_view text,
                                                            bool final) const {
  const std::vector<ToolCallSegment> all_content = {{0, text.size(), std::nullopt}};
  const size_t start = skip_blank(text, 0);
  const std::string_view rest = text.substr(start);
  if (!final && (rest.empty() || (rest.size() < kPythonTag.size() && kPythonTag.starts_with(rest))))
    return {};  // not yet known whether this is a call
  size_t pos = start;
  if (rest.starts_with(kPythonTag)) {
    pos += kPythonTag.size();
  } else if (!rest.starts_with("{")) {
    return all_content;
  }
  std::vector<ToolCallSegment> out;
  // Text that is not a call: all content when final, else shown from here on.
  auto malformed = [&](size_t from) {
    if (final) return all_content;
    out.push_back({from, text.size(), std::nullopt});
    return out;
  };
  while (true) {
    pos = skip_blank(text, pos);
    if (pos == text.size()) return final && out.empty() ? all_content : out;
    if (text[pos] != '{') return malformed(pos);
    const size_t end = json_object_end(text, pos);
    if (end == std::string_view::npos) return final ? all_content : out;
    std::optional<FunctionCall> call = parse_function_call(text.substr(pos, end - pos));
    if (!call) return malformed(pos);
    out.push_back({pos, end, std::move(call)});
    pos = skip_blank(text, end);
    if (pos == text.size()) return out;
    if (text[pos] != ';') return malformed(pos);
    ++pos;
  }
}

}  // namespace quench
