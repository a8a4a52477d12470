#include "quench/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "quench/core/error.h"
#include "quench/engine/logits_processors.h"
#include "quench/ops/sampling/sample_rows_reference.h"

namespace quench {

RowSampler row_sampler(const SamplingParams& params, std::mt19937_64& rng) {
  return RowSampler{params.temperature, params.top_k, params.top_p, params.min_p, rng()};
}

// The reference scans the row for non-finite logits and takes the argmax at temperature 0 itself;
// only the error's message needs the first bad logit, so it is looked for only then. A greedy
// token takes no key from the generator.
int32_t sample_token(std::span<const float> logits, const SamplingParams& params,
                     std::mt19937_64& rng) {
  QUENCH_REQUIRE(!logits.empty(), "sample_token: empty logits");
  const RowSampler sampler =
      params.temperature == 0.0f ? RowSampler{0.0f} : row_sampler(params, rng);
  const int32_t token = sample_row_reference(logits, sampler);
  if (token < 0) {
    const auto bad =
        std::find_if(logits.begin(), logits.end(), [](float x) { return !std::isfinite(x); });
    fail(str_cat("sample_token: logit of token ", bad - logits.begin(), " is ", *bad,
                 " (the model produced a non-finite value)"));
  }
  return token;
}

bool greedy_by_argmax(const SamplingParams& params) {
  return params.temperature == 0.0f && !adjusts_logits(params);
}

}  // namespace quench
