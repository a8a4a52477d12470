#include "quench/engine/structured_output/reasoning_gate.h"

#include <algorithm>

namespace quench {

std::string_view ReasoningGate::feed(std::string_view token_bytes) {
  switch (state_) {
    case State::kAnswer:
      return token_bytes;
    case State::kMayOpen:
      if (token_bytes == spec_.open) {
        state_ = State::kReasoning;
        return {};
      }
      state_ = State::kAnswer;
      return token_bytes;
    case State::kReasoning:
      break;
  }
  // The marker may have begun in earlier tokens: search the held tail and this token together.
  const std::string text = tail_ + std::string(token_bytes);
  const size_t at = text.find(spec_.close);
  if (at != std::string::npos) {
    state_ = State::kAnswer;
    tail_.clear();
    const size_t answer = at + spec_.close.size() - (text.size() - token_bytes.size());
    return token_bytes.substr(answer);
  }
  const size_t keep = std::min(text.size(), spec_.close.size() - 1);
  tail_ = text.substr(text.size() - keep);
  return {};
}

}  // namespace quench
