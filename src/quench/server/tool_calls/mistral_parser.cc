#include "quench/server/tool_calls/mistral_parser.h"

#include <nlohmann/json.hpp>

#include "quench/server/tool_calls/call_text.h"

namespace quench {
namespace {

constexpr std::string_view kMarker = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// What follows one marker: calls read (pos moves past them), not yet all written, or text that
// is not a call.
enum class Read { kCalls, kIncomplete, kMalformed };

// A JSON list of call objects at text[pos] ('['): one segment per object.
Read read_list(std::string_view text, size_t& pos, std::vector<ToolCallSegment>& calls) {
  const size_t end = json_object_end(text, pos);  // brackets count as braces do
  if (end == std::string_view::npos) return Read::kIncomplete;
  std::vector<ToolCallSegment> found;
  size_t p = skip_blank(text, pos + 1);
  while (true) {
    if (p >= end || text[p] != '{') return Read::kMalformed;
    const size_t object_end = json_object_end(text, p);
    if (object_end == std::string_view::npos || object_end > end) return Read::kMalformed;
    std::optional<FunctionCall> call = parse_function_call(text.substr(p, object_end - p));
    if (!call) return Read::kMalformed;
    found.push_back({p, object_end, std::move(call)});
    p = skip_blank(text, object_end);
    if (p < end && text[p] == ',') {
      p = skip_blank(text, p + 1);
      continue;
    }
    if (p + 1 != end) return Read::kMalformed;  // only the closing bracket may follow
    break;
  }
  calls.insert(calls.end(), found.begin(), found.end());
  pos = end;
  return Read::kCalls;
}

// `text` at pos starts with `literal`, or (kIncomplete) ends inside it.
Read expect(std::string_view text, size_t& pos, std::string_view literal) {
  const std::string_view rest = text.substr(pos);
  if (rest.starts_with(literal)) {
    pos += literal.size();
    return Read::kCalls;
  }
  return literal.starts_with(rest) ? Read::kIncomplete : Read::kMalformed;
}

// name[ARGS]{...} (or name[CALL_ID]id[ARGS]{...}) at text[pos]: one call.
Read read_named(std::string_view text, size_t& pos, std::vector<ToolCallSegment>& calls) {
  const size_t begin = pos;
  size_t p = pos;
  while (p < text.size() && is_name_char(text[p]))
    ++p;
  if (p == text.size()) return Read::kIncomplete;
  if (p == begin) return Read::kMalformed;
  const std::string name(text.substr(begin, p - begin));
  // v13's call id: [CALL_ID] and its letters and digits.
  const std::string_view rest = text.substr(p);
  if (rest.starts_with(kCallId)) {
    p += kCallId.size();
    while (p < text.size() && is_name_char(text[p]))
      ++p;
    if (p == text.size()) return Read::kIncomplete;
  } else if (kCallId.starts_with(rest) && !kArgs.starts_with(rest)) {
    return Read::kIncomplete;
  }
  // [ARGS], or (some v11 models write it so) the arguments' object right after the name.
  if (text[p] != '{') {
    if (const Read r = expect(text, p, kArgs); r != Read::kCalls) return r;
  }
  p = skip_blank(text, p);
  if (p == text.size()) return Read::kIncomplete;
  if (text[p] != '{') return Read::kMalformed;
  const size_t end = json_object_end(text, p);
  if (end == std::string_view::npos) return Read::kIncomplete;
  const std::string object = nlohmann::json{{"name", name}}.dump();  // {"name":"..."}
  std::optional<FunctionCall> call =
      parse_function_call(object.substr(0, object.size() - 1) +
                          ",\"arguments\":" + std::string(text.substr(p, end - p)) + "}");
  if (!call) return Read::kMalformed;
  calls.push_back({begin, end, std::move(call)});
  pos = end;
  return Read::kCalls;
}

}  // namespace

std::vector<ToolCallSegment> MistralToolCallParser::scan(std::string_view text, bool final) const {
  const std::vector<ToolCallSegment> all_content = {{0, text.size(), std::nullopt}};
  std::vector<ToolCallSegment> out;
  auto content = [&out](size_t begin, size_t end) {
    if (end > begin) out.push_back({begin, end, std::nullopt});
  };
  size_t pos = 0;
  while (true) {
    const size_t marker = text.find(kMarker, pos);
    if (marker == std::string_view::npos) {
      content(pos,
              final ? text.size() : text.size() - partial_marker_suffix(text.substr(pos), kMarker));
      return out;
    }
    content(pos, marker);
    size_t p = skip_blank(text, marker + kMarker.size());
    Read read = Read::kIncomplete;
    std::vector<ToolCallSegment> calls;
    if (p < text.size())
      read = text[p] == '[' ? read_list(text, p, calls) : read_named(text, p, calls);
    if (read == Read::kIncomplete && !final) return out;  // still being written
    if (read != Read::kCalls) {
      // A call that cannot be read is shown, never dropped: when final, the whole text.
      if (final) return all_content;
      content(marker, text.size());
      return out;
    }
    out.insert(out.end(), calls.begin(), calls.end());
    pos = p;
  }
}

}  // namespace quench
