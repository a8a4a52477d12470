#include "quench/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "quench/core/error.h"

namespace quench {

int32_t sample_token(std::span<const float> logits, const SamplingParams& params,
                     std::mt19937_64& rng) {
  QUENCH_REQUIRE(!logits.empty(), "sample_token: empty logits");
  for (size_t i = 0; i < logits.size(); ++i) {
    QUENCH_REQUIRE(std::isfinite(logits[i]), "sample_token: logit of token ", i, " is ", logits[i],
                   " (the model produced a non-finite value)");
  }
  if (params.temperature == 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Candidates by descending logit (index order among equals, so results are reproducible).
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = order.size();
  if (params.top_k > 0) keep = std::min(keep, static_cast<size_t>(params.top_k));
  std::vector<double> prob(keep);
  const double top = logits[order[0]];
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    prob[i] = std::exp((logits[order[i]] - top) / params.temperature);
    sum += prob[i];
  }
  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t nucleus = 0;
    while (nucleus < keep) {
      cumulative += prob[nucleus] / sum;
      ++nucleus;
      if (cumulative >= params.top_p) break;
    }
    keep = nucleus;
    sum = std::accumulate(prob.begin(), prob.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  const double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += prob[i];
    if (u < cumulative) return order[i];
  }
  return order[keep - 1];
}

bool greedy_without_logprobs(const SamplingParams& params) {
  return params.temperature == 0.0f && params.logprobs < 0;
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
