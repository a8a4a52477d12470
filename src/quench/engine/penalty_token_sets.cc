#include "quench/engine/penalty_token_sets.h"

#include <algorithm>

#include "quench/core/error.h"

namespace quench {

void PenaltyTokenSets::sync(std::span<const int32_t> prompt, std::span<const int32_t> output) {
  if (!std::ranges::equal(prompt, prompt_)) {
    prompt_.assign(prompt.begin(), prompt.end());
    prompt_tokens_ = prompt_;
    std::ranges::sort(prompt_tokens_);
    prompt_tokens_.erase(std::unique(prompt_tokens_.begin(), prompt_tokens_.end()),
                         prompt_tokens_.end());
  }
  const size_t same =
      static_cast<size_t>(std::ranges::mismatch(counted_, output).in1 - counted_.begin());
  for (size_t i = counted_.size(); i > same; --i)
    count(counted_[i - 1], -1);
  counted_.resize(same);
  for (size_t i = same; i < output.size(); ++i) {
    count(output[i], 1);
    counted_.push_back(output[i]);
  }
}

void PenaltyTokenSets::count(int32_t token, int32_t delta) {
  const auto at = std::ranges::lower_bound(output_counts_, token, {}, &TokenCount::token);
  if (at != output_counts_.end() && at->token == token) {
    at->count += delta;
    if (at->count == 0) output_counts_.erase(at);
    return;
  }
  QUENCH_REQUIRE(delta > 0, "PenaltyTokenSets: uncounting token ", token, ", which is not counted");
  output_counts_.insert(at, TokenCount{token, delta});
}

}  // namespace quench
