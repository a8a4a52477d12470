#include "quench/engine/sampling_params.h"

#include <cmath>

#include "quench/core/error.h"

namespace quench {

namespace {

constexpr size_t kMaxStopStrings = 16;
constexpr int32_t kMaxLogprobs = 20;

}  // namespace

void SamplingParams::validate() const {
  QUENCH_REQUIRE(std::isfinite(temperature) && temperature >= 0.0f, "temperature ", temperature,
                 " must be a finite number >= 0 (0 = greedy)");
  QUENCH_REQUIRE(top_k >= 0, "top_k ", top_k, " must be >= 0 (0 = all tokens)");
  QUENCH_REQUIRE(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f, "top_p ", top_p,
                 " must be in (0, 1]");
  QUENCH_REQUIRE(max_tokens >= 1, "max_tokens ", max_tokens, " must be >= 1");
  QUENCH_REQUIRE(logprobs >= -1 && logprobs <= kMaxLogprobs, "logprobs ", logprobs,
                 " must be in [0, ", kMaxLogprobs, "] (or -1 for none)");
  QUENCH_REQUIRE(prompt_logprobs >= -1 && prompt_logprobs <= kMaxLogprobs, "prompt_logprobs ",
                 prompt_logprobs, " must be in [0, ", kMaxLogprobs, "] (or -1 for none)");
  QUENCH_REQUIRE(stop.size() <= kMaxStopStrings, "stop has ", stop.size(), " strings; at most ",
                 kMaxStopStrings);
  for (size_t i = 0; i < stop.size(); ++i) {
    QUENCH_REQUIRE(!stop[i].empty(), "stop[", i, "] is empty; stop strings must not be");
  }
}

}  // namespace quench
