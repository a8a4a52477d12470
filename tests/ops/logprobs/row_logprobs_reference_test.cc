// The logprobs reference on hand-computed rows: the log-softmax, the top entries' order (ties to
// the lower id), rows without a softmax (NaN, infinities) and the arguments it refuses.
#include "quench/ops/logprobs/row_logprobs_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "harness/expect_error.h"

namespace quench {
namespace {

TEST(RowLogprobsReference, LogSoftmaxAndTheTopInOrder) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  const TokenLogprobs lp = row_logprobs_reference(logits, 2, 3);
  EXPECT_NEAR(lp.logprob, 2.0 - z, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // ties to the lower id
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[0].second, 3.0 - z, 1e-6);
  EXPECT_NEAR(lp.top[2].second, 2.0 - z, 1e-6);
  EXPECT_TRUE(row_logprobs_reference(logits, 0, 0).top.empty());
  // More asked for than the row holds: the whole row, in order.
  EXPECT_EQ(row_logprobs_reference(logits, 0, 20).top.size(), 4u);
}

TEST(RowLogprobsReference, LargeLogitsDoNotOverflow) {
  // exp(1000) overflows double: the largest logit comes out of the sum first.
  const std::vector<float> logits = {1000.0f, 999.0f};
  const double z = 1000.0 + std::log(1.0 + std::exp(-1.0));
  const TokenLogprobs lp = row_logprobs_reference(logits, 1, 1);
  EXPECT_NEAR(lp.logprob, 999.0 - z, 1e-4);
  EXPECT_NEAR(lp.top[0].second, 1000.0 - z, 1e-4);
}

TEST(RowLogprobsReference, ARowWithoutASoftmaxIsNaNWithNoTop) {
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    const std::vector<float> logits = {1.0f, bad, 2.0f};
    const TokenLogprobs lp = row_logprobs_reference(logits, 0, 2);
    EXPECT_TRUE(std::isnan(lp.logprob)) << bad;
    EXPECT_TRUE(lp.top.empty()) << bad;
  }
}

TEST(RowLogprobsReference, RefusesBadArguments) {
  const std::vector<float> logits = {1.0f, 2.0f};
  EXPECT_QUENCH_ERROR(row_logprobs_reference(logits, 2, 1), {"token 2", "2 logits"});
  EXPECT_QUENCH_ERROR(row_logprobs_reference(logits, -1, 1), {"token -1"});
  EXPECT_QUENCH_ERROR(row_logprobs_reference(logits, 0, 21), {"top 21", "[0, 20]"});
  EXPECT_QUENCH_ERROR(row_logprobs_reference({}, 0, 1), {"empty"});
}

}  // namespace
}  // namespace quench
