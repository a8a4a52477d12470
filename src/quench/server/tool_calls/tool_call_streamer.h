// Tool calls in a streamed chat response. Fed the output text as it grows, it says what to send
// now: content (text that cannot be part of a call; a possible call start waits for the text that
// decides it) and whole calls as delta.tool_calls entries once each call's text is complete, the
// arguments in one piece. Blank text next to calls is dropped, as the whole response trims it.
//
// The stream and the whole response differ in one case: malformed call text after calls already
// sent arrives as content after them, where the whole response makes the entire text content.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "quench/server/tool_calls/tool_call_parser.h"

namespace quench {

class ToolCallStreamer {
 public:
  ToolCallStreamer(const ToolCallParser& parser, bool parallel_tool_calls)
      : parser_(parser), parallel_(parallel_tool_calls) {}

  struct Delta {
    std::string content;
    // delta.tool_calls entries: {"index", "id", "type": "function", "function": {"name",
    // "arguments"}}.
    nlohmann::json tool_calls = nlohmann::json::array();
  };

  // `text` is all the output so far that may be shown (each call a longer one); `final` when it is
  // the finished output.
  Delta update(std::string_view text, bool final);

  // Whether a call was sent: the choice finishes with "tool_calls".
  bool called() const { return calls_ > 0; }

 private:
  const ToolCallParser& parser_;
  bool parallel_;
  size_t consumed_ = 0;  // bytes of the text dealt with
  int32_t calls_ = 0;    // calls sent
  std::string blank_;    // trailing whitespace held back: a call may follow it
};

}  // namespace quench
