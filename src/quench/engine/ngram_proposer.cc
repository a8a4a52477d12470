#include "quench/engine/ngram_proposer.h"

#include <algorithm>

#include "quench/core/error.h"

namespace quench {

void NgramSpeculation::validate() const {
  QUENCH_REQUIRE(num_speculative_tokens >= 0 && num_speculative_tokens <= kMaxSpeculativeTokens,
                 "num_speculative_tokens ", num_speculative_tokens, " is outside [0, ",
                 kMaxSpeculativeTokens, "] (a decode row takes at most ", kMaxSpeculativeTokens + 1,
                 " query tokens)");
  QUENCH_REQUIRE(prompt_lookup_min >= 1 && prompt_lookup_min <= prompt_lookup_max,
                 "prompt_lookup_min ", prompt_lookup_min, " and prompt_lookup_max ",
                 prompt_lookup_max, " must satisfy 1 <= min <= max");
}

std::vector<int32_t> propose_ngram_drafts(std::span<const int32_t> tokens,
                                          const NgramSpeculation& config, int32_t max_drafts) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (max_drafts <= 0) return {};
  for (int64_t n = std::min<int64_t>(config.prompt_lookup_max, len - 1);
       n >= config.prompt_lookup_min; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - n));
    // The most recent earlier occurrence: the latest start whose n tokens end before the suffix
    // itself and are followed by at least one token.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_drafts, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

}  // namespace quench
