// Draft tokens for n-gram speculative decoding (prompt lookup): when the last n tokens of a
// sequence appeared earlier in it, the tokens that followed them then are a cheap guess of what
// follows now (quoted code, repeated names, templated text). The model verifies the guess in the
// next step: a decode row of 1 + k tokens costs little more than one while decode reads the
// weights and the cache once either way.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quench/attention/attention_metadata.h"

namespace quench {

struct NgramSpeculation {
  int32_t num_speculative_tokens = 0;  // k, at most kMaxSpeculativeTokens; 0 = off
  int32_t prompt_lookup_min = 1;       // the shortest suffix to look up
  int32_t prompt_lookup_max = 4;       // the longest (tried first)

  void validate() const;  // throws quench::Error naming the field and the allowed range
};

// A decode row holds the last sampled token and the drafts.
inline constexpr int32_t kMaxSpeculativeTokens = kMaxDecodeQueryTokens - 1;

// How far back the scheduler looks for an earlier occurrence (tokens): the search is linear in
// it per decode row and step.
inline constexpr int32_t kNgramLookback = 4096;

// Up to `max_drafts` tokens: for n from prompt_lookup_max down to prompt_lookup_min, the tokens
// after the most recent earlier occurrence of the last n tokens; empty when none occurs.
std::vector<int32_t> propose_ngram_drafts(std::span<const int32_t> tokens,
                                          const NgramSpeculation& config, int32_t max_drafts);

}  // namespace quench
