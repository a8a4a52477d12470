#include "quench/server/tool_calls/hermes_parser.h"

#include "quench/server/tool_calls/call_text.h"

namespace quench {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

}  // namespace

std::vector<ToolCallSegment> HermesToolCallParser::scan(std::string_view text, bool final) const {
  std::vector<ToolCallSegment> out;
  auto content = [&out](size_t begin, size_t end) {
    if (end > begin) out.push_back({begin, end, std::nullopt});
  };
  size_t pos = 0;
  while (true) {
    const size_t open = text.find(kOpen, pos);
    if (open == std::string_view::npos) {
      content(pos,
              final ? text.size() : text.size() - partial_marker_suffix(text.substr(pos), kOpen));
      return out;
    }
    content(pos, open);
    const size_t body = open + kOpen.size();
    const size_t close = text.find(kClose, body);
    if (close == std::string_view::npos && !final) return out;  // still being written
    const size_t body_end = close == std::string_view::npos ? text.size() : close;
    const size_t end = close == std::string_view::npos ? text.size() : close + kClose.size();
    std::optional<FunctionCall> call = parse_function_call(text.substr(body, body_end - body));
    if (call) {
      out.push_back({open, end, std::move(call)});
    } else if (final) {
      return {{0, text.size(), std::nullopt}};
    } else {
      content(open, end);
    }
    if (end == text.size()) return out;
    pos = end;
  }
}

}  // namespace quench
