// Hand-checked bf16 and f16 conversions: ties to even, subnormals of the target and of the fp32
// input, overflow to infinity, NaN of both signs to 0x7fff, -0, max finite, and the decode of
// every f16 code against an independent ldexp formula.
#include "quench/numerics/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace quench {
namespace {

float from_bits(uint32_t u) {
  return bits_to_float(u);
}

TEST(Bf16, HandCheckedValues) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  // Ties to even: 1 + 2^-8 lies halfway between 0x3f80 (even) and 0x3f81.
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3f808000u)), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x3f807fffu)), 0x3f80);
  // Max finite 0x7f7f; its upper tie rounds to the even neighbour, which is infinity.
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x7fc00000u)), 0x7fff);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0xffc00001u)), 0x7fff);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x7f800001u)), 0x7fff);
  // fp32 subnormal inputs round within bf16's own subnormals (same exponent range).
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x00000001u)), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x00008000u)), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x00008001u)), 0x0001);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x80018000u)), 0x8002);
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x007fffffu)), 0x0080);  // rounds up to min normal
}

TEST(Bf16, DecodeIsTheUpperHalfOfTheFloat) {
  for (uint32_t code = 0; code < 0x10000u; ++code) {
    EXPECT_EQ(float_to_bits(bf16_bits_to_float(static_cast<uint16_t>(code))), code << 16);
  }
  EXPECT_EQ(to_float(to_bf16(3.0f)), 3.0f);
}

TEST(F16, HandCheckedValues) {
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);
  // Ties to even in the normal range: 1 + 2^-11 and 1 + 3 * 2^-11.
  EXPECT_EQ(float_to_f16_bits(from_bits(0x3f801000u)), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(from_bits(0x3f803000u)), 0x3c02);
  EXPECT_EQ(float_to_f16_bits(from_bits(0x3f801001u)), 0x3c01);
  // Overflow: 65520 is the tie between 65504 (odd code) and 65536, so it becomes infinity.
  EXPECT_EQ(float_to_f16_bits(from_bits(0x477fefffu)), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_f16_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_f16_bits(from_bits(0x7fc00000u)), 0x7fff);
  EXPECT_EQ(float_to_f16_bits(from_bits(0xff800001u)), 0x7fff);
  // Target subnormals: quantum 2^-24.
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);     // tie -> even 0
  EXPECT_EQ(float_to_f16_bits(from_bits(0x33000001u)), 0x0001);    // just above the tie
  EXPECT_EQ(float_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);     // tie -> even 2
  EXPECT_EQ(float_to_f16_bits(-std::ldexp(5.0f, -25)), 0x8002);    // tie -> even 2
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);     // min normal
  EXPECT_EQ(float_to_f16_bits(std::ldexp(1023.0f, -24)), 0x03ff);  // max subnormal
  // fp32 subnormals are far below half the smallest f16 subnormal.
  EXPECT_EQ(float_to_f16_bits(from_bits(0x00400000u)), 0x0000);
  EXPECT_EQ(float_to_f16_bits(from_bits(0x80000001u)), 0x8000);
}

TEST(F16, DecodeOfEveryCode) {
  for (uint32_t code = 0; code < 0x10000u; ++code) {
    const int sign = code >> 15;
    const int exponent = (code >> 10) & 0x1f;
    const int mantissa = code & 0x3ff;
    const float got = f16_bits_to_float(static_cast<uint16_t>(code));
    if (exponent == 0x1f) {
      EXPECT_EQ(std::isnan(got), mantissa != 0) << std::hex << code;
      if (mantissa == 0) {
        EXPECT_EQ(got, sign ? -INFINITY : INFINITY);
      }
      continue;
    }
    const float magnitude =
        exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                      : std::ldexp(1.0f + static_cast<float>(mantissa) / 1024.0f, exponent - 15);
    EXPECT_EQ(float_to_bits(got), float_to_bits(sign ? -magnitude : magnitude)) << std::hex << code;
    // Every finite code round-trips.
    EXPECT_EQ(float_to_f16_bits(got), code) << std::hex << code;
  }
}

}  // namespace
}  // namespace quench
