#include "quench/server/incremental_detokenizer.h"

namespace quench {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

// Decodes the whole sequence each time: simple and exact (a token's text can depend on its
// neighbours' bytes); linear per push, fine for replies of thousands of tokens.
std::string IncrementalDetokenizer::push(const std::vector<int32_t>& tokens) {
  ids_.insert(ids_.end(), tokens.begin(), tokens.end());
  std::string text = tokenizer_.decode(ids_, true, true);
  size_t stable = text.size();
  while (stable >= 3 && text.compare(stable - 3, 3, kReplacement) == 0)
    stable -= 3;
  if (stable <= emitted_) return {};
  std::string delta = text.substr(emitted_, stable - emitted_);
  emitted_ = stable;
  return delta;
}

std::string IncrementalDetokenizer::finish() {
  const std::string text = tokenizer_.decode(ids_, true, true);
  if (text.size() <= emitted_) return {};
  std::string delta = text.substr(emitted_);
  emitted_ = text.size();
  return delta;
}

}  // namespace quench
