#include "quench/ops/qk_norm/qk_norm_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/bf16.h"

namespace quench {
namespace {

// x = [1, 2, 3, 4]: mean(x^2) = 30 / 4 = 7.5; weights are exact in bf16.
TEST(QkNormReference, HandChecked) {
  const float eps = 1e-6f;
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<uint16_t> w = {float_to_bf16_bits(1.0f), float_to_bf16_bits(0.5f),
                                   float_to_bf16_bits(2.0f), float_to_bf16_bits(-1.0f)};
  qk_rms_norm_reference(1, 1, 4, w.data(), eps, x.data());
  const double r = std::sqrt(7.5 + 1e-6);
  EXPECT_NEAR(x[0], 1.0 / r, 1e-6);
  EXPECT_NEAR(x[1], 2.0 / r * 0.5, 1e-6);
  EXPECT_NEAR(x[2], 3.0 / r * 2.0, 1e-6);
  EXPECT_NEAR(x[3], -4.0 / r, 1e-6);
}

// Each (token, head) row is normalized on its own: rows of very different magnitude, a large
// eps that visibly matters, against float64 math.
TEST(QkNormReference, RowsIndependentAgainstDouble) {
  const int32_t T = 3, H = 4, D = 64;
  const float eps = 0.25f;
  testing_support::RandomInputs rng(5);
  std::vector<float> x = rng.uniform(static_cast<size_t>(T * H * D));
  for (int32_t row = 0; row < T * H; ++row) {
    for (int32_t d = 0; d < D; ++d)
      x[static_cast<size_t>(row * D + d)] *= static_cast<float>(row + 1);
  }
  std::vector<uint16_t> w(D);
  for (auto& b : w)
    b = float_to_bf16_bits(rng.uniform_float(0.5f, 1.5f));
  const std::vector<float> input = x;
  qk_rms_norm_reference(T, H, D, w.data(), eps, x.data());
  for (int32_t row = 0; row < T * H; ++row) {
    double sum = 0;
    for (int32_t d = 0; d < D; ++d)
      sum += double(input[row * D + d]) * input[row * D + d];
    const double r = std::sqrt(sum / D + eps);
    for (int32_t d = 0; d < D; ++d) {
      const double expected = input[row * D + d] / r * bf16_bits_to_float(w[d]);
      EXPECT_NEAR(x[row * D + d], expected, 1e-5 * std::fabs(expected) + 1e-7)
          << "row " << row << " d " << d;
    }
  }
}

TEST(QkNormReference, Errors) {
  std::vector<float> x(4, 1.0f);
  const std::vector<uint16_t> w(4, float_to_bf16_bits(1.0f));
  EXPECT_QUENCH_ERROR(qk_rms_norm_reference(1, 1, 4, w.data(), 0.0f, x.data()), {"eps 0", "> 0"});
  EXPECT_QUENCH_ERROR(qk_rms_norm_reference(1, 0, 4, w.data(), 1e-6f, x.data()), {"num_heads 0"});
  EXPECT_QUENCH_ERROR(qk_rms_norm_reference(1, 1, 0, w.data(), 1e-6f, x.data()), {"head_dim 0"});
  EXPECT_QUENCH_ERROR(qk_rms_norm_reference(-1, 1, 4, w.data(), 1e-6f, x.data()),
                      {"num_tokens -1"});
  EXPECT_QUENCH_ERROR(qk_rms_norm_reference(1, 1, 4, nullptr, 1e-6f, x.data()), {"weight"});
}

}  // namespace
}  // namespace quench
