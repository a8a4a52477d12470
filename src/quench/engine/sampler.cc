#include "quench/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
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

bool greedy_without_logprobs(const SamplingParams& params) {
  return params.temperature == 0.0f && params.logprobs < 0 && !adjusts_logits(params);
}

bool sampled_without_logprobs(const SamplingParams& params) {
  return params.temperature > 0.0f && params.logprobs < 0 && !adjusts_logits(params);
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t top) {
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits)
    sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = max_logit + std::log(sum);
  TokenLogprobs out;
  out.logprob = static_cast<float>(logits[static_cast<size_t>(token)] - log_z);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto k = std::min(static_cast<size_t>(std::max(top, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                    });
  for (size_t i = 0; i < k; ++i)
    out.top.emplace_back(order[i],
                         static_cast<float>(logits[static_cast<size_t>(order[i])] - log_z));
  return out;
}

}  // namespace quench
