#include "quench/server/reasoning/reasoning_parser.h"

#include "quench/core/error.h"

namespace quench {
namespace {

constexpr std::string_view kOpen = kReasoningOpen;
constexpr std::string_view kClose = kReasoningClose;

// The length of the longest suffix of `text` that is a proper prefix of `marker`: bytes that
// more text may turn into the marker.
size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

bool is_blank(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

ReasoningSplit ReasoningParser::split(std::string_view text, bool final) const {
  ReasoningSplit s;
  size_t begin = 0;
  if (text.starts_with(kOpen)) {
    begin = kOpen.size();
  } else if (!final && kOpen.starts_with(text)) {
    return s;  // "<thi": the opening marker, or not
  } else if (!reasoning_first_) {
    s.content_begin = 0;  // no reasoning block: all content
    return s;
  }
  s.has_reasoning = true;
  s.reasoning_begin = begin;
  const size_t close = text.find(kClose, begin);
  if (close == std::string_view::npos) {
    // Still thinking, or cut off while thinking.
    s.reasoning_end =
        final ? text.size() : text.size() - partial_marker_suffix(text.substr(begin), kClose);
    return s;
  }
  s.reasoning_end = close;
  size_t content = close + kClose.size();
  while (content < text.size() && is_blank(text[content]))
    ++content;
  // Blank so far: content waits for its first character (or the end).
  if (content < text.size() || final) s.content_begin = content;
  return s;
}

ReasoningGateSpec ReasoningParser::gate_spec() const {
  return {reasoning_first_};
}

const ReasoningParser& reasoning_parser(std::string_view name) {
  static const ReasoningParser qwen3(false);
  static const ReasoningParser deepseek_r1(true);
  if (name == "qwen3") return qwen3;
  if (name == "deepseek_r1") return deepseek_r1;
  throw Error(str_cat("reasoning parser '", name,
                      "' is not supported; allowed: ", reasoning_parser_names()));
}

const char* reasoning_parser_names() {
  return "deepseek_r1, qwen3";
}

ReasoningOutput extract_reasoning(const ReasoningParser& parser, std::string_view text) {
  const ReasoningSplit s = parser.split(text, true);
  ReasoningOutput out;
  if (s.has_reasoning) {
    out.reasoning =
        std::string(text.substr(s.reasoning_begin, s.reasoning_end - s.reasoning_begin));
  }
  if (s.content_begin != std::string_view::npos)
    out.content = std::string(text.substr(s.content_begin));
  return out;
}

}  // namespace quench
