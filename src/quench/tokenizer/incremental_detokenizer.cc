#include "quench/tokenizer/incremental_detokenizer.h"

#include "quench/tokenizer/utf8.h"

namespace quench {

std::string IncrementalDetokenizer::push(const std::vector<int32_t>& tokens) {
  for (int32_t id : tokens) {
    if (held_special_ >= 0) pending_ += tokenizer_.token_bytes(held_special_, false, true);
    held_special_ = -1;
    if (!skip_special_tokens_ && tokenizer_.is_special(id)) {
      held_special_ = id;
    } else {
      pending_ += tokenizer_.token_bytes(id, true, true);
    }
  }
  const size_t settled = utf8_settled_prefix(pending_);
  std::string delta = utf8_lossy(std::string_view(pending_).substr(0, settled));
  pending_.erase(0, settled);
  text_ += delta;
  return delta;
}

std::string IncrementalDetokenizer::finish(bool last_token_ended_it) {
  if (held_special_ >= 0 && !last_token_ended_it)
    pending_ += tokenizer_.token_bytes(held_special_, false, true);
  held_special_ = -1;
  std::string delta = utf8_lossy(pending_);
  pending_.clear();
  text_ += delta;
  return delta;
}

std::string decode_output_text(const Tokenizer& tokenizer, std::span<const int32_t> tokens,
                               bool skip_special_tokens, bool last_token_ended_it) {
  if (!skip_special_tokens && last_token_ended_it && !tokens.empty() &&
      tokenizer.is_special(tokens.back()))
    tokens = tokens.first(tokens.size() - 1);
  return tokenizer.decode(tokens, skip_special_tokens, true);
}

}  // namespace quench
