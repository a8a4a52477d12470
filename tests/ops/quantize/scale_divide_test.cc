#include "quench/ops/quantize/scale_divide.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "quench/numerics/float_bits.h"

namespace quench {
namespace {

uint32_t quotient_bits(float x, float scale) {
  volatile float s = scale;  // keep the compiler from rewriting x / s as a product
  return float_to_bits(x / s);
}

TEST(ScaleDivide, MatchesIeeeQuotientOnEveryMantissaForManyScales) {
  std::mt19937 rng(7);
  // Edge scales: mantissas next to 1 and 2, thirds; then random ones with random exponents.
  std::vector<float> scales = {1.0f,
                               bits_to_float(0x3f800001u),
                               bits_to_float(0x3fffffffu),
                               0.7f,
                               bits_to_float(0x3faaaaabu),
                               3.0f,
                               0.0123f,
                               448.0f};
  for (int i = 0; i < 8; ++i) {
    const uint32_t exponent = 100u + rng() % 60u;
    scales.push_back(bits_to_float((exponent << 23) | (rng() & 0x7fffffu)));
  }
  for (float scale : scales) {
    const float inv = 1.0f / scale;
    int64_t mismatches = 0;
    // Every mantissa at one exponent (the correction is exponent-invariant away from the range
    // ends), both signs at a stride.
    for (uint32_t m = 0; m < (1u << 23); ++m) {
      const float x = bits_to_float(0x3f800000u | m);
      if (float_to_bits(divide_by_scale(x, scale, inv)) != quotient_bits(x, scale)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0) << "scale=" << scale;
  }
}

TEST(ScaleDivide, MatchesIeeeQuotientAcrossExponentsAndSpecials) {
  std::mt19937 rng(11);
  const float scale = 0.37f;
  const float inv = 1.0f / scale;
  for (int i = 0; i < 2000000; ++i) {
    // Any finite or infinite float whose quotient stays normal.
    const float x = bits_to_float(rng());
    if (std::isnan(x)) continue;
    const float q = x / scale;
    if (q != 0.0f && std::fabs(q) < std::numeric_limits<float>::min()) continue;
    ASSERT_EQ(float_to_bits(divide_by_scale(x, scale, inv)), quotient_bits(x, scale)) << "x=" << x;
  }
  EXPECT_TRUE(std::isnan(divide_by_scale(std::numeric_limits<float>::quiet_NaN(), scale, inv)));
  EXPECT_EQ(divide_by_scale(std::numeric_limits<float>::infinity(), scale, inv),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(divide_by_scale(-3.0e38f, scale, inv), -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace quench
