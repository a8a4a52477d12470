// The draw of row_sampling.h and its CPU reference: the shared exp and ln stay within 2e-6 of the
// platform's; draws over many keys follow softmax(logits / T) restricted to min_p, top-k (ties to
// the lower id) and the nucleus; one key gives one token; non-finite rows and bad parameters are
// reported.
#include "quench/ops/sampling/sample_rows_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "harness/expect_error.h"

namespace quench {
namespace {

TEST(RowSampling, ExpAndLogMatchThePlatformsClosely) {
  for (float x = -86.0f; x <= 0.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(sampling_exp(x), want, 2e-6 * want) << x;
  }
  EXPECT_EQ(sampling_exp(0.0f), 1.0f);
  EXPECT_EQ(sampling_exp(-100.0f), 0.0f);
  for (float u = 1.1920929e-7f; u < 1.0f; u = u * 1.01f + 1e-7f) {
    const double want = -std::log(static_cast<double>(u));
    EXPECT_NEAR(sampling_neg_log(u), want, 2e-6 * want + 1e-7) << u;
  }
}

TEST(RowSampling, OrderKeysOrderLikeTheFloatsAndMergeTheZeros) {
  const std::vector<float> ascending = {
      -std::numeric_limits<float>::infinity(), -3.5f, -1e-30f, 0.0f, 1e-30f, 2.0f, 1e30f};
  for (size_t i = 1; i < ascending.size(); ++i)
    EXPECT_LT(sampling_order_key(ascending[i - 1]), sampling_order_key(ascending[i]));
  EXPECT_EQ(sampling_order_key(-0.0f), sampling_order_key(0.0f));
  for (float x : ascending)
    EXPECT_EQ(sampling_key_value(sampling_order_key(x)), x);
}

TEST(RowSampling, UniformsStayInsideTheOpenInterval) {
  for (uint64_t key : {0ull, 1ull, 0xffffffffffffffffull}) {
    for (int32_t id = 0; id < 100000; ++id) {
      const float u = sampling_uniform(key, id);
      ASSERT_GT(u, 0.0f);
      ASSERT_LT(u, 1.0f);
    }
  }
}

// Frequencies of draws over 40000 keys against the expected probabilities (5 standard errors).
void expect_frequencies(const std::vector<float>& logits, const RowSampler& base,
                        const std::vector<double>& want) {
  std::mt19937_64 keys(3);
  std::vector<int> counts(logits.size());
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) {
    RowSampler s = base;
    s.key = keys();
    const int32_t token = sample_row_reference(logits, s);
    ASSERT_GE(token, 0);
    ++counts[static_cast<size_t>(token)];
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const double sigma = std::sqrt(want[i] * (1 - want[i]) / draws);
    EXPECT_NEAR(counts[i] / static_cast<double>(draws), want[i], 5 * sigma + 1e-9) << "token " << i;
  }
}

std::vector<double> softmax(const std::vector<float>& logits, float temperature,
                            const std::vector<bool>& kept) {
  std::vector<double> p(logits.size(), 0.0);
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (kept[i]) sum += p[i] = std::exp(logits[i] / static_cast<double>(temperature));
  for (double& x : p)
    x /= sum;
  return p;
}

TEST(RowSampling, DrawsFollowTheTemperedSoftmaxOfTheKeptTokens) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f, 1.5f, -0.5f};
  RowSampler t;
  t.temperature = 1.7f;
  expect_frequencies(logits, t, softmax(logits, 1.7f, {true, true, true, true, true}));
  RowSampler k3 = t;
  k3.top_k = 3;
  expect_frequencies(logits, k3, softmax(logits, 1.7f, {true, true, false, true, false}));
  // At T = 0.5 the weights are 1, e^-1, e^-2, e^-4, e^-5 (total 1.53): 0.8 of it takes the
  // logits 2 and 1.5.
  RowSampler p = t;
  p.temperature = 0.5f;
  p.top_p = 0.8f;
  expect_frequencies(logits, p, softmax(logits, 0.5f, {false, true, false, true, false}));
  // min_p 0.3 at T = 1 keeps the tokens within ln(1/0.3) = 1.2 of the largest.
  RowSampler m = t;
  m.temperature = 1.0f;
  m.min_p = 0.3f;
  expect_frequencies(logits, m, softmax(logits, 1.0f, {true, true, false, true, false}));
}

TEST(RowSampling, TopKTiesKeepTheLowerIds) {
  // Five equal logits and top_k 3: ids 1, 2 and 4 stay (plus nothing else); each a third.
  const std::vector<float> logits = {0.0f, 5.0f, 5.0f, 1.0f, 5.0f, 5.0f, 5.0f};
  RowSampler k3;
  k3.top_k = 3;
  const double third = 1.0 / 3.0;
  expect_frequencies(logits, k3, {0, third, third, 0, third, 0, 0});
  // The nucleus stops within the ties too: 0.5 of five equal tokens is three of them.
  RowSampler p;
  p.top_p = 0.5f;
  p.min_p = 0.5f;
  expect_frequencies(logits, p, {0, third, third, 0, third, 0, 0});
}

TEST(RowSampling, GreedyTinyTopPAndTopKOneTakeTheLargest) {
  const std::vector<float> logits = {0.1f, 0.3f, 0.2f, 0.3f};
  for (uint64_t key = 0; key < 50; ++key) {
    EXPECT_EQ(sample_row_reference(logits, RowSampler{0.0f, 0, 1.0f, 0.0f, key}), 1);
    EXPECT_EQ(sample_row_reference(logits, RowSampler{5.0f, 1, 1.0f, 0.0f, key}), 1);
    EXPECT_EQ(sample_row_reference(logits, RowSampler{5.0f, 0, 1e-3f, 0.0f, key}), 1);
    EXPECT_EQ(sample_row_reference(logits, RowSampler{1e-39f, 0, 1.0f, 0.0f, key}), 1);
  }
}

TEST(RowSampling, OneKeyGivesOneTokenAndKeysSpreadTheDraws) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(5000);
  for (float& x : logits)
    x = normal(rng);
  RowSampler s{1.0f, 0, 0.9f, 0.0f, 1234};
  const int32_t first = sample_row_reference(logits, s);
  EXPECT_EQ(sample_row_reference(logits, s), first);
  int differ = 0;
  for (uint64_t key = 0; key < 20; ++key) {
    s.key = key;
    differ += sample_row_reference(logits, s) != first ? 1 : 0;
  }
  EXPECT_GE(differ, 15);
}

TEST(RowSampling, NonFiniteRowsAndBadParametersAreReported) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sample_row_reference(std::vector<float>{1.0f, nan}, RowSampler{}), -1);
  EXPECT_EQ(sample_row_reference(std::vector<float>{-inf, 1.0f}, RowSampler{0.0f}), -1);
  const std::vector<float> logits = {1.0f, 2.0f};
  EXPECT_QUENCH_ERROR(sample_row_reference(logits, RowSampler{-1.0f}), {"temperature", ">= 0"});
  EXPECT_QUENCH_ERROR(sample_row_reference(logits, RowSampler{1.0f, -2}), {"top_k", ">= 0"});
  EXPECT_QUENCH_ERROR(sample_row_reference(logits, RowSampler{1.0f, 0, 0.0f}), {"top_p", "(0, 1]"});
  EXPECT_QUENCH_ERROR(sample_row_reference(logits, RowSampler{1.0f, 0, 1.0f, 1.5f}),
                      {"min_p", "[0, 1]"});
  EXPECT_QUENCH_ERROR(sample_row_reference(std::vector<float>{}, RowSampler{}), {"empty"});
}

}  // namespace
}  // namespace quench
