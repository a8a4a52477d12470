#include "quench/server/reasoning/reasoning_streamer.h"

namespace quench {

ReasoningStreamer::Delta ReasoningStreamer::update(std::string_view text, bool final) {
  const ReasoningSplit s = parser_.split(text, final);
  Delta d;
  const size_t reasoning = s.reasoning_end - s.reasoning_begin;
  if (reasoning > reasoning_sent_) {
    d.reasoning =
        std::string(text.substr(s.reasoning_begin + reasoning_sent_, reasoning - reasoning_sent_));
    reasoning_sent_ = reasoning;
  }
  if (s.content_begin != std::string_view::npos) d.content = text.substr(s.content_begin);
  return d;
}

}  // namespace quench
