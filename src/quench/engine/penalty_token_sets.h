// The tokens a request's penalties read, kept per sequence and brought up to date each step: its
// prompt's distinct tokens and its output's distinct tokens with their counts, sorted by token,
// so that logit_edits (logits_processors.h) builds a row's edits in one merge. Rebuilding them per
// step (an ordered-map insert per prompt and output token) cost ~130 us per 1024-token request on
// the host, ~4 ms a step for 32 penalized requests: the c = 32 serving run with a repetition
// penalty decoded at 7.0 ms per token against 2.5 without (bench/LOG.md, thirtieth session).
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <vector>

namespace quench {

class PenaltyTokenSets {
 public:
  // Follows each token list (data()[size()]), above every token id: a merge needs no bounds
  // checks.
  static constexpr int32_t kEnd = INT_MAX;

  // Brings the sets to `prompt` and `output`. Either may have changed in any way since the last
  // call (the output usually grew by a token; rejected draft tokens shrink it): the prompt set is
  // rebuilt when the prompt differs, and the counts follow the output's longest unchanged
  // prefix, so a call costs a comparison with the tokens last seen plus a sorted insert or erase
  // per changed output token.
  void sync(std::span<const int32_t> prompt, std::span<const int32_t> output);

  // Sorted, distinct; each followed by kEnd.
  std::span<const int32_t> prompt_tokens() const { return without_end(prompt_tokens_); }
  std::span<const int32_t> output_tokens() const { return without_end(output_tokens_); }
  // output_tokens()[i]'s count; followed by a 0.
  std::span<const int32_t> output_counts() const { return without_end(output_counts_); }
  size_t output_size() const { return counted_.size(); }

 private:
  static std::span<const int32_t> without_end(const std::vector<int32_t>& list) {
    return {list.data(), list.size() - 1};
  }
  void count(int32_t token, int32_t delta);

  std::vector<int32_t> prompt_;  // the prompt prompt_tokens_ was built from
  std::vector<int32_t> prompt_tokens_{kEnd};
  std::vector<int32_t> counted_;  // the output the counts hold, in order
  std::vector<int32_t> output_tokens_{kEnd};
  std::vector<int32_t> output_counts_{0};
};

}  // namespace quench
