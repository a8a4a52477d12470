#include "quench/tokenizer/incremental_detokenizer.h"

#include "quench/tokenizer/utf8.h"

namespace quench {

std::string IncrementalDetokenizer::push(const std::vector<int32_t>& tokens) {
  for (int32_t id : tokens)
    pending_ += tokenizer_.token_bytes(id, true, true);
  const size_t settled = utf8_settled_prefix(pending_);
  std::string delta = utf8_lossy(std::string_view(pending_).substr(0, settled));
  pending_.erase(0, settled);
  text_ += delta;
  return delta;
}

std::string IncrementalDetokenizer::finish() {
  std::string delta = utf8_lossy(pending_);
  pending_.clear();
  text_ += delta;
  return delta;
}

}  // namespace quench
