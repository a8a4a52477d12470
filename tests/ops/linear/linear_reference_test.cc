// The linear reference: HF's [out, in] weight layout (a transposed weight gives other numbers),
// every token row, and fp32 sums that agree with a double-precision sum on random inputs.
#include "quench/ops/linear/linear_reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "harness/expect_error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"

namespace quench {
namespace {

std::vector<uint16_t> bf16_bits(const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  for (float v : values)
    bits.push_back(float_to_bf16_bits(v));
  return bits;
}

TEST(LinearReference, HandExampleUsesTheOutByInLayout) {
  const std::vector<float> x = {1, 2, 3, 0.5f, -1, 4};                    // [2 tokens, 3 in]
  const std::vector<uint16_t> w = bf16_bits({1, 0, -1, 2, 0.5f, 0.25f});  // [2 out, 3 in]
  std::vector<float> out(4);
  linear_reference(2, 3, 2, x.data(), w.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{-2.0f, 3.75f, -3.5f, 1.5f}));
}

// FP8 weights: each element is fp8 x its scale, the scale chosen per tensor, per output row or per
// block (row / block_out, col / block_in), blocks that do not divide the shape included.
TEST(LinearReference, Fp8WeightsTakeTheirScalesByRowAndBlock) {
  const std::vector<float> x = {1, 2, 3, 0.5f, -1, 4};  // [2 tokens, 3 in]
  std::vector<uint8_t> w;                               // [2 out, 3 in]: 1 0 -1 / 2 0.5 0.25
  for (float v : {1.0f, 0.0f, -1.0f, 2.0f, 0.5f, 0.25f})
    w.push_back(float_to_fp8_e4m3(v));
  std::vector<float> out(4);
  const float tensor[] = {2.0f};
  linear_fp8_weight_reference(2, 3, 2, x.data(), w.data(), tensor, WeightScaling::kTensor, 0, 0,
                              out.data());
  EXPECT_EQ(out, (std::vector<float>{-4.0f, 7.5f, -7.0f, 3.0f}));
  const float channel[] = {2.0f, 0.5f};
  linear_fp8_weight_reference(2, 3, 2, x.data(), w.data(), channel, WeightScaling::kChannel, 0, 0,
                              out.data());
  EXPECT_EQ(out, (std::vector<float>{-4.0f, 1.875f, -7.0f, 0.75f}));
  // Blocks of 1 x 2: columns {0, 1} and {2} of each row take their own scale.
  const float blocks[] = {2.0f, 4.0f, 0.5f, 8.0f};
  linear_fp8_weight_reference(2, 3, 2, x.data(), w.data(), blocks, WeightScaling::kBlock, 1, 2,
                              out.data());
  // Row 0: 1*2*x0 + 0 - 1*4*x2; row 1: 2*0.5*x0 + 0.5*0.5*x1 + 0.25*8*x2.
  EXPECT_EQ(out, (std::vector<float>{2.0f - 12.0f, 1.0f + 0.5f + 6.0f, 1.0f - 16.0f,
                                     0.5f - 0.25f + 8.0f}));
  EXPECT_QUENCH_ERROR(linear_fp8_weight_reference(2, 3, 2, x.data(), w.data(), nullptr,
                                                  WeightScaling::kTensor, 0, 0, out.data()),
                      {"scales", "must not be null"});
}

TEST(LinearReference, RandomRowsMatchADoubleSum) {
  const int32_t tokens = 5, in = 300, out_features = 37;  // not multiples of the row blocks
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * in));
  std::vector<float> wf(static_cast<size_t>(out_features * in));
  for (float& v : x)
    v = dist(rng);
  for (float& v : wf)
    v = bf16_bits_to_float(float_to_bf16_bits(dist(rng) * 0.05f));
  const std::vector<uint16_t> w = bf16_bits(wf);
  std::vector<float> out(static_cast<size_t>(tokens * out_features));
  linear_reference(tokens, in, out_features, x.data(), w.data(), out.data());
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t n = 0; n < out_features; ++n) {
      double want = 0.0, magnitude = 0.0;
      for (int32_t k = 0; k < in; ++k) {
        const double term = static_cast<double>(x[static_cast<size_t>(t * in + k)]) *
                            wf[static_cast<size_t>(n * in + k)];
        want += term;
        magnitude += std::abs(term);
      }
      EXPECT_NEAR(out[static_cast<size_t>(t * out_features + n)], want, 1e-6 * in * magnitude)
          << "token " << t << " feature " << n;
    }
  }
}

TEST(LinearReference, BadSizesAndNullPointersAreErrors) {
  float x = 1.0f, out = 0.0f;
  const uint16_t w = float_to_bf16_bits(1.0f);
  EXPECT_QUENCH_ERROR(linear_reference(1, 0, 1, &x, &w, &out), {"features", ">= 1"});
  EXPECT_QUENCH_ERROR(linear_reference(-1, 1, 1, &x, &w, &out), {"num_tokens", ">= 0"});
  EXPECT_QUENCH_ERROR(linear_reference(1, 1, 1, nullptr, &w, &out), {"must not be null"});
}

}  // namespace
}  // namespace quench
