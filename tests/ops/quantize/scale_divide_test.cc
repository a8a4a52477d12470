#include "quench/ops/quantize/scale_divide.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "quench/numerics/float_bits.h"
#include "quench/numerics/fp8.h"

namespace quench {
namespace {

uint32_t quotient_bits(float x, float scale) {
  volatile float s = scale;  // keep the compiler from rewriting x / s as a product
  return float_to_bits(x / s);
}

TEST(ScaleDivide, MatchesIeeeQuotientOnEveryMantissaForManyScales) {
  std::mt19937 rng(7);  // 32-bit outputs
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
    const uint32_t exponent = 100u + static_cast<uint32_t>(rng() % 60u);
    scales.push_back(bits_to_float((exponent << 23) | static_cast<uint32_t>(rng() & 0x7fffffu)));
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
    // Any float or infinity with |x| and |x / scale| >= 2^-100.
    const float tiny = std::ldexp(1.0f, -100);
    const float x = bits_to_float(static_cast<uint32_t>(rng()));
    if (std::isnan(x) || std::fabs(x) < tiny || std::fabs(x / scale) < tiny) continue;
    ASSERT_EQ(float_to_bits(divide_by_scale(x, scale, inv)), quotient_bits(x, scale)) << "x=" << x;
  }
  EXPECT_TRUE(std::isnan(divide_by_scale(std::numeric_limits<float>::quiet_NaN(), scale, inv)));
  EXPECT_EQ(divide_by_scale(std::numeric_limits<float>::infinity(), scale, inv),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(divide_by_scale(-3.0e38f, scale, inv), -std::numeric_limits<float>::infinity());
  // The unguarded form flags exactly those cases with NaN.
  EXPECT_TRUE(
      std::isnan(divide_by_scale_unguarded(std::numeric_limits<float>::infinity(), scale, inv)));
  EXPECT_TRUE(std::isnan(divide_by_scale_unguarded(-3.0e38f, scale, inv)));
  // Tiny values: at most one float ulp off, and the FP8 code is the same.
  for (float x : {1.8441517e-38f, 1.0668483e-38f, -3.0e-39f, 1.0e-45f}) {
    const float got = divide_by_scale(x, scale, inv);
    EXPECT_LE(std::fabs(got - x / scale), std::fabs(std::nextafter(x / scale, 1.0f) - x / scale));
    EXPECT_EQ(float_to_fp8_e4m3(got), float_to_fp8_e4m3(x / scale));
  }
}

}  // namespace
}  // namespace quench
