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
    prompt_tokens_.push_back(kEnd);
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
  // kEnd stays last: every token id is below it.
  const auto at = std::lower_bound(output_tokens_.begin(), output_tokens_.end() - 1, token);
  const auto i = at - output_tokens_.begin();
  if (*at == token) {
    output_counts_[static_cast<size_t>(i)] += delta;
    if (output_counts_[static_cast<size_t>(i)] == 0) {
      output_tokens_.erase(at);
      output_counts_.erase(output_counts_.begin() + i);
    }
    return;
  }
  QUENCH_REQUIRE(delta > 0, "PenaltyTokenSets: uncounting token ", token, ", which is not counted");
  output_tokens_.insert(at, token);
  output_counts_.insert(output_counts_.begin() + i, delta);
}

}  // namespace quench
