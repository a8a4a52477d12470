// Sampling as a request's parameters ask it (the runner's argmax or keyed draw): greedy is argmax
// with ties to the lowest id; top_k = 1 and a tiny top_p are greedy at any temperature; draws
// follow softmax(logits / T) restricted to the kept set; bad parameters are errors that name the
// field, and a non-finite row has no pick.
#include "quench/engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/expect_error.h"
#include "quench/ops/argmax/argmax_reference.h"
#include "quench/ops/sampling/sample_rows_reference.h"

namespace quench {
namespace {

// A request's token from one row as the engine has the runner pick it: the argmax at temperature
// 0 (no key taken), else a draw keyed by the request's generator.
int32_t sample_token(std::span<const float> logits, const SamplingParams& params,
                     std::mt19937_64& rng) {
  if (params.temperature == 0.0f) {
    int32_t token = -1;
    argmax_rows_reference(logits.data(), 1, static_cast<int32_t>(logits.size()), &token);
    return token;
  }
  return sample_row_reference(logits, row_sampler(params, rng));
}

TEST(Sampler, GreedyTakesTheLargestLogitAndTheLowestIdOnTies) {
  std::mt19937_64 rng(1);
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(sample_token(logits, SamplingParams{}, rng), 1);
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedyAtAnyTemperature) {
  std::mt19937_64 rng(2);
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.25f};
  SamplingParams k1;
  k1.temperature = 5.0f;
  k1.top_k = 1;
  SamplingParams p0;
  p0.temperature = 5.0f;
  p0.top_p = 1e-3f;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(sample_token(logits, k1, rng), 2);
    EXPECT_EQ(sample_token(logits, p0, rng), 2);
  }
}

// Frequencies of 40000 draws against the expected probabilities (5 standard errors).
void expect_frequencies(const std::vector<float>& logits, const SamplingParams& params,
                        const std::vector<double>& want) {
  std::mt19937_64 rng(3);
  std::vector<int> counts(logits.size());
  const int draws = 40000;
  for (int i = 0; i < draws; ++i)
    ++counts[static_cast<size_t>(sample_token(logits, params, rng))];
  for (size_t i = 0; i < want.size(); ++i) {
    const double sigma = std::sqrt(want[i] * (1 - want[i]) / draws);
    EXPECT_NEAR(counts[i] / static_cast<double>(draws), want[i], 5 * sigma + 1e-9) << "token " << i;
  }
}

TEST(Sampler, DrawsFollowTheTemperedSoftmaxOfTheKeptTokens) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f, 1.5f};
  SamplingParams t2;
  t2.temperature = 2.0f;
  std::vector<double> soft(4);
  double sum = 0.0;
  for (size_t i = 0; i < 4; ++i)
    sum += soft[i] = std::exp(logits[i] / 2.0);
  for (double& p : soft)
    p /= sum;
  expect_frequencies(logits, t2, soft);

  // top_k = 2 keeps tokens 1 and 3; top_p = 0.5 keeps token 1 (p = 0.62 at T = 1) alone.
  SamplingParams k2;
  k2.temperature = 1.0f;
  k2.top_k = 2;
  const double p1 = 1.0 / (1.0 + std::exp(-0.5));
  expect_frequencies(logits, k2, {0.0, p1, 0.0, 1.0 - p1});
  SamplingParams p5;
  p5.temperature = 1.0f;
  p5.top_k = 2;
  p5.top_p = 0.5f;
  expect_frequencies(logits, p5, {0.0, 1.0, 0.0, 0.0});
}

// min_p drops the tokens under min_p times the largest tempered probability, before top-k and
// top-p (vLLM's order): here 0.5 keeps logits 2 and 1.5 at T = 1 (e^-0.5 = 0.61 of the largest)
// and drops 1 (0.37) and 0.
TEST(Sampler, MinPDropsTheUnlikelyBeforeTopKAndTopP) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f, 1.5f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;
  const double a = 1.0, b = std::exp(-0.5);
  expect_frequencies(logits, p, {0.0, a / (a + b), 0.0, b / (a + b)});
  p.top_p = 0.5f;  // the nucleus of what min_p left: the largest alone (0.62 >= 0.5)
  expect_frequencies(logits, p, {0.0, 1.0, 0.0, 0.0});
  SamplingParams bad;
  bad.min_p = 1.5f;
  EXPECT_QUENCH_ERROR(bad.validate(), {"min_p 1.5", "[0, 1]"});
}

TEST(Sampler, LogprobsAskForAtMostTwentyTopEntries) {
  SamplingParams p;
  p.logprobs = 21;
  EXPECT_QUENCH_ERROR(p.validate(), {"logprobs 21", "[0, 20]"});
  p.logprobs = 20;
  p.prompt_logprobs = 21;
  EXPECT_QUENCH_ERROR(p.validate(), {"prompt_logprobs 21", "[0, 20]"});
}

// Which requests a draft can be verified for by argmax alone: greedy ones without logit
// adjustments (logprobs or not).
TEST(Sampler, GreedyByArgmaxIsTemperatureZeroWithoutAdjustments) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams sampled;
  sampled.temperature = 0.8f;
  EXPECT_TRUE(greedy_by_argmax(greedy));
  EXPECT_FALSE(greedy_by_argmax(sampled));
  SamplingParams with_logprobs = greedy;
  with_logprobs.logprobs = 2;
  SamplingParams biased = greedy;
  biased.logit_bias.push_back({7, 1.5f});
  EXPECT_TRUE(greedy_by_argmax(with_logprobs));
  EXPECT_FALSE(greedy_by_argmax(biased));
}

TEST(Sampler, BadParametersAndLogitsAreErrors) {
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_QUENCH_ERROR(p.validate(), {"temperature -1", ">= 0"});
  p = {};
  p.top_p = 0.0f;
  EXPECT_QUENCH_ERROR(p.validate(), {"top_p 0", "(0, 1]"});
  p = {};
  p.top_k = -2;
  EXPECT_QUENCH_ERROR(p.validate(), {"top_k -2"});
  p = {};
  p.max_tokens = 0;
  EXPECT_QUENCH_ERROR(p.validate(), {"max_tokens 0", ">= 1"});
  // A row with a non-finite logit has no pick (-1: the engine names it the model's fault).
  std::mt19937_64 rng(4);
  const std::vector<float> broken = {1.0f, NAN};
  EXPECT_EQ(sample_token(broken, SamplingParams{}, rng), -1);
  SamplingParams warm;
  warm.temperature = 0.7f;
  EXPECT_EQ(sample_token(broken, warm, rng), -1);
}

}  // namespace
}  // namespace quench
