// Text for a stream of tokens: each push returns the text the new tokens complete. A byte-level
// token can end in the middle of a UTF-8 character (an emoji spans several tokens); that tail is
// held back until the character completes, so a streaming client never sees a U+FFFD that the
// final text does not have.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quench/tokenizer/tokenizer.h"

namespace quench {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The new printable text after appending `tokens` (special tokens are skipped).
  std::string push(const std::vector<int32_t>& tokens);
  // Whatever is still held back (an incomplete character becomes U+FFFD).
  std::string finish();
  // All text so far, held-back tail included.
  std::string text() const { return tokenizer_.decode(ids_, true, true); }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  size_t emitted_ = 0;  // bytes of the decoded text already returned
};

}  // namespace quench
