#include "quench/server/tool_calls/tool_call_streamer.h"

#include <algorithm>

namespace quench {

ToolCallStreamer::Delta ToolCallStreamer::update(std::string_view text, bool final) {
  Delta delta;
  for (const ToolCallSegment& s : parser_.scan(text, final)) {
    if (s.end <= consumed_) continue;
    if (s.call) {
      if (s.begin < consumed_) continue;  // overlaps text already sent as content
      consumed_ = s.end;
      blank_.clear();
      if (!parallel_ && calls_ > 0) continue;
      delta.tool_calls.push_back(
          {{"index", calls_},
           {"id", parser_.new_call_id()},
           {"type", "function"},
           {"function", {{"name", s.call->name}, {"arguments", s.call->arguments}}}});
      ++calls_;
      continue;
    }
    const size_t begin = std::max(s.begin, consumed_);
    blank_.append(text.substr(begin, s.end - begin));
    consumed_ = s.end;
    const size_t last = blank_.find_last_not_of(" \t\r\n");
    if (last != std::string::npos) {
      delta.content += blank_.substr(0, last + 1);
      blank_.erase(0, last + 1);
    }
  }
  if (final && calls_ == 0) {
    delta.content += blank_;  // plain text keeps its trailing whitespace
    blank_.clear();
  }
  return delta;
}

}  // namespace quench
