// Reasoning in a streamed chat response. Fed the output text as it grows, it says which
// reasoning text to send now (delta.reasoning_content) and where the content stands: the text
// after the reasoning block, for the content deltas (or the tool-call streamer) to take from. A
// marker split across tokens waits for the text that decides it, so the stream adds up to what
// the whole response says (extract_reasoning).
#pragma once

#include <string>
#include <string_view>

#include "quench/server/reasoning/reasoning_parser.h"

namespace quench {

class ReasoningStreamer {
 public:
  explicit ReasoningStreamer(const ReasoningParser& parser) : parser_(parser) {}

  struct Delta {
    std::string reasoning;     // reasoning text not sent before
    std::string_view content;  // all content so far: a view into the text, empty before it starts
  };

  // `text` is all the output so far that may be shown (each call a longer one); `final` when it is
  // the finished output.
  Delta update(std::string_view text, bool final);

 private:
  const ReasoningParser& parser_;
  size_t reasoning_sent_ = 0;  // bytes of the reasoning sent
};

}  // namespace quench
