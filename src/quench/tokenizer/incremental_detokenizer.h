// Text for a stream of tokens: each push returns the text the new tokens complete. A byte-level
// token can end in the middle of a UTF-8 character (an emoji spans several tokens); that tail is
// held back until the character completes, so a streaming client never sees a U+FFFD that the
// final text does not have. Each push costs only its own tokens (Tokenizer::token_bytes and a
// UTF-8 repair of the unsettled tail), and the text is the same as decoding all tokens at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quench/tokenizer/tokenizer.h"

namespace quench {

class IncrementalDetokenizer {
 public:
  // Special tokens are skipped, and ids the tokenizer lacks (a model's padding rows) give no text.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The new settled text after appending `tokens`.
  std::string push(const std::vector<int32_t>& tokens);
  // Whatever is still held back (an incomplete character becomes U+FFFD).
  std::string finish();
  // The settled text so far (what push has returned).
  const std::string& settled_text() const { return text_; }

 private:
  const Tokenizer& tokenizer_;
  std::string text_;     // settled
  std::string pending_;  // bytes a later token may still complete
};

}  // namespace quench
