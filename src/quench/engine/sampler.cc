#include "quench/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "quench/core/error.h"
#include "quench/engine/logits_processors.h"

namespace quench {

namespace {

// Draws one of `order`'s first `keep` tokens with probability prob[i] / sum (prob in order's
// order).
int32_t draw(const std::vector<int32_t>& order, const std::vector<double>& prob, size_t keep,
             double sum, std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += prob[i];
    if (u < cumulative) return order[i];
  }
  return order[keep - 1];
}

}  // namespace

// Without top-k or top-p every token is a candidate: one pass draws from the tempered softmax in
// id order (no sort). With them, only the candidates are ordered: the top_k largest (nth_element,
// then a sort of those k), or for top_p alone a growing prefix of the ranking until it holds the
// nucleus. A full sort of a 128k vocabulary per token cost ~10 ms of host time per sampled row.
// Ranking: descending logit, the lower id first among equals (reproducible).
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
  const size_t vocab = logits.size();
  const double top = *std::max_element(logits.begin(), logits.end());
  const double inv_t = 1.0 / params.temperature;
  // min_p: a token whose tempered probability is under min_p times the largest weighs 0.
  const double min_log_weight =
      params.min_p > 0.0f ? std::log(static_cast<double>(params.min_p)) : -1e300;
  const auto weight = [&](int32_t token) {
    const double x = (logits[static_cast<size_t>(token)] - top) * inv_t;
    return x < min_log_weight ? 0.0 : std::exp(x);
  };
  const bool top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  const bool top_p = params.top_p < 1.0f;
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> prob;
  if (!top_k && !top_p) {
    prob.resize(vocab);
    double sum = 0.0;
    for (size_t i = 0; i < vocab; ++i)
      sum += prob[i] = weight(static_cast<int32_t>(i));
    return draw(order, prob, vocab, sum, rng);
  }
  const auto ranks_before = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  // Orders the `count` best-ranked tokens first (the rest of `order` stays unordered).
  const auto rank_first = [&](size_t count) {
    const auto end = order.begin() + static_cast<std::ptrdiff_t>(count);
    if (count < vocab) std::nth_element(order.begin(), end, order.end(), ranks_before);
    std::sort(order.begin(), end, ranks_before);
  };
  size_t keep = top_k ? static_cast<size_t>(params.top_k) : vocab;
  double sum = 0.0;
  if (top_k) {
    rank_first(keep);
    prob.resize(keep);
    for (size_t i = 0; i < keep; ++i)
      sum += prob[i] = weight(order[i]);
  } else {
    for (size_t i = 0; i < vocab; ++i)
      sum += weight(static_cast<int32_t>(i));
  }
  if (!top_p) return draw(order, prob, keep, sum, rng);  // top-k alone
  // The nucleus: the smallest ranked prefix whose probability reaches top_p. Rank a prefix that
  // grows 4x until it holds the nucleus (a few hundred tokens at usual temperatures).
  size_t ranked = top_k ? keep : std::min<size_t>(256, vocab);
  if (!top_k) rank_first(ranked);
  prob.clear();
  double cumulative = 0.0;
  size_t nucleus = 0;
  while (true) {
    for (; nucleus < ranked; ++nucleus) {
      prob.push_back(weight(order[nucleus]));
      cumulative += prob.back() / sum;
      if (cumulative >= params.top_p) break;
    }
    if (nucleus < ranked || ranked == keep) break;
    ranked = std::min(ranked * 4, keep);
    // The prefix ranked so far stays in place: rank the next stretch among the rest.
    const auto from = order.begin() + static_cast<std::ptrdiff_t>(nucleus);
    const auto to = order.begin() + static_cast<std::ptrdiff_t>(ranked);
    if (ranked < vocab) std::nth_element(from, to, order.end(), ranks_before);
    std::sort(from, to, ranks_before);
  }
  keep = std::min(nucleus + 1, keep);
  const double nucleus_sum =
      std::accumulate(prob.begin(), prob.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  return draw(order, prob, keep, nucleus_sum, rng);
}

bool greedy_without_logprobs(const SamplingParams& params) {
  return params.temperature == 0.0f && params.logprobs < 0 && !adjusts_logits(params);
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
