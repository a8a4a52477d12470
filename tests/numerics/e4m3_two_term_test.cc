// The split that bf16 q over FP8 KV relies on where it meets FP8 wgmma (e4m3x2_two_term in
// numerics/e4m3_two_term.cuh: the Hopper prefill's Q fragments, the decode kernel's Q·Kᵀ
// variant): a bf16 value y, scaled by a power of two into |y| < 256, becomes two e4m3 codes,
// hi = e4m3(y) and lo = e4m3(y - hi), both rounded to nearest even with saturation (the kernels'
// cvt.rn.satfinite; the host conversions match CUDA's on every float, see
// cuda_host_cross_check_test.cc). Claimed there: hi + lo == y exactly for |y| >= 2^-2, and
// |hi + lo - y| <= 2^-10 below. Checked here on every bf16 value below 256.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"

namespace quench {
namespace {

float two_term_value(float y) {
  const uint8_t hi = float_to_fp8_e4m3(y);
  const float hi_value = fp8_e4m3_to_float(hi);
  const uint8_t lo = float_to_fp8_e4m3(y - hi_value);
  return hi_value + fp8_e4m3_to_float(lo);
}

TEST(E4m3TwoTerm, EveryBf16BelowTheScaledMaximumSplitsAsClaimed) {
  int64_t checked_exact = 0;
  int64_t checked_small = 0;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float y = bf16_bits_to_float(static_cast<uint16_t>(bits));
    if (!std::isfinite(y) || std::fabs(y) >= 256.0f) continue;
    const float value = two_term_value(y);
    if (std::fabs(y) >= 0.25f) {
      ASSERT_EQ(value, y) << "bf16 bits 0x" << std::hex << bits;
      ++checked_exact;
    } else {
      ASSERT_LE(std::fabs(value - y), std::ldexp(1.0f, -10)) << "bf16 bits 0x" << std::hex << bits;
      ++checked_small;
    }
  }
  // Both regions hold many values (10 binades of 128 per sign above 2^-2).
  EXPECT_EQ(checked_exact, 2 * 10 * 128);
  EXPECT_GT(checked_small, 30000);
}

// The claim rests on how few significant bits bf16 carries: the remainder of a round-to-nearest
// hi is at most half of hi's unit, so up to 9 significant bits leave at most 4 for lo, but 10 can
// leave 5, which e4m3 cannot hold (1 + 31 * 2^-9: hi = 1, remainder 1.1111b * 2^-5).
TEST(E4m3TwoTerm, TenSignificantBitsAreNotAlwaysExact) {
  const float y = 1.0f + 31.0f * std::ldexp(1.0f, -9);
  EXPECT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(y)), 1.0f);
  EXPECT_NE(two_term_value(y), y);
}

}  // namespace
}  // namespace quench
