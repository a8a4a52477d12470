// The tokens a request's penalties read, kept per sequence and brought up to date each step: its
// prompt's distinct tokens and its output's tokens with their counts, both sorted by token, so
// that logit_edits (logits_processors.h) builds a row's edits in one merge. Rebuilding them per
// step (an ordered-map insert per prompt and output token) cost ~130 us per 1024-token request on
// the host, ~4 ms a step for 32 penalized requests: the c = 32 serving run with a repetition
// penalty decoded at 7.0 ms per token against 2.5 without (bench/LOG.md, thirtieth session).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace quench {

struct TokenCount {
  int32_t token = 0;
  int32_t count = 0;
};

class PenaltyTokenSets {
 public:
  // Brings the sets to `prompt` and `output`. Either may have changed in any way since the last
  // call (the output usually grew by a token; rejected draft tokens shrink it): the prompt set is
  // rebuilt when the prompt differs, and the counts follow the output's longest unchanged
  // prefix, so a call costs a comparison with the tokens last seen plus a sorted insert or erase
  // per changed output token.
  void sync(std::span<const int32_t> prompt, std::span<const int32_t> output);

  std::span<const int32_t> prompt_tokens() const { return prompt_tokens_; }     // sorted, unique
  std::span<const TokenCount> output_counts() const { return output_counts_; }  // by token
  size_t output_size() const { return counted_.size(); }

 private:
  void count(int32_t token, int32_t delta);

  std::vector<int32_t> prompt_;  // the prompt prompt_tokens_ was built from
  std::vector<int32_t> prompt_tokens_;
  std::vector<int32_t> counted_;  // the output output_counts_ counts, in order
  std::vector<TokenCount> output_counts_;
};

}  // namespace quench
