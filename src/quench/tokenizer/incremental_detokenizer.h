// Text for a stream of tokens: each push returns the text the new tokens complete. A byte-level
// token can end in the middle of a UTF-8 character (an emoji spans several tokens); that tail is
// held back until the character completes, so a streaming client never sees a U+FFFD that the
// final text does not have. Each push costs only its own tokens (Tokenizer::token_bytes and a
// UTF-8 repair of the unsettled tail), and the text is the same as decoding all tokens at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "quench/tokenizer/tokenizer.h"

namespace quench {

class IncrementalDetokenizer {
 public:
  // Ids the tokenizer lacks (a model's padding rows) give no text. Special tokens are skipped,
  // or with skip_special_tokens = false shown, all but one that ended the request (an
  // end-of-sequence or stop token, whose text a client must not see): a special token is held
  // back until another token follows it, and finish shows or drops it (as decode_output_text).
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = true)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // The new settled text after appending `tokens`.
  std::string push(const std::vector<int32_t>& tokens);
  // Whatever is still held back (an incomplete character becomes U+FFFD); a held special token
  // only where the last token did not end the request (its finish was not a stop token's).
  std::string finish(bool last_token_ended_it = true);
  // The settled text so far (what push has returned).
  const std::string& settled_text() const { return text_; }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_ = true;
  int32_t held_special_ = -1;  // a special token not yet followed by another (shown specials)
  std::string text_;           // settled
  std::string pending_;        // bytes a later token may still complete
};

// A whole output's text, as IncrementalDetokenizer builds it token by token: special tokens
// skipped, or shown but for a last one that ended the request.
std::string decode_output_text(const Tokenizer& tokenizer, std::span<const int32_t> tokens,
                               bool skip_special_tokens, bool last_token_ended_it);

}  // namespace quench
