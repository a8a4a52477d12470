// A token's log-probability under its logit row's softmax, with the row's most likely tokens: what
// a request's `logprobs` and `prompt_logprobs` return per token.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace quench {

// The most top entries a request may ask for (vLLM's default max_logprobs); the device kernel
// keeps this many candidates per thread.
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprobs {
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // (id, log-probability), most likely first
};

}  // namespace quench
