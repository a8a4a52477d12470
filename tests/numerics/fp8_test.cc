// Hand-checked FP8 e4m3fn / e5m2 conversions: ties to even, subnormals of the target and of the
// fp32 input, saturation to +-448 / +-57344 (infinities included), NaN of both signs to 0x7f,
// -0, max finite, and the decode of every code against an independent ldexp formula.
#include "quench/numerics/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quench/core/error.h"

namespace quench {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
float from_bits(uint32_t u) {
  return bits_to_float(u);
}

TEST(Fp8E4M3, HandCheckedValues) {
  EXPECT_EQ(float_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(-1.0f), 0xb8);
  EXPECT_EQ(float_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(240.0f), 0x77);
  EXPECT_EQ(float_to_fp8_e4m3(256.0f), 0x78);
  // Ties to even: 1.0625 is halfway between 1.0 (0x38) and 1.125 (0x39).
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);
  EXPECT_EQ(float_to_fp8_e4m3(std::nextafter(1.0625f, 2.0f)), 0x39);
  // Max finite and saturation: 464 would round to 480 (the NaN slot), so it saturates.
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(1e6f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-448.0f), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(kInf), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-kInf), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(from_bits(0x7fc00000u)), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3(from_bits(0xffc00000u)), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3(from_bits(0xff800001u)), 0x7f);
  // Target subnormals: quantum 2^-9, min normal 2^-6.
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie -> even 0
  EXPECT_EQ(float_to_fp8_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);  // tie -> even 2
  EXPECT_EQ(float_to_fp8_e4m3(-std::ldexp(7.0f, -9)), 0x87);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(15.0f, -10)), 0x08);  // tie 7 | 8 -> min normal
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -6)), 0x08);
  // fp32 subnormal inputs vanish, keeping the sign.
  EXPECT_EQ(float_to_fp8_e4m3(from_bits(0x007fffffu)), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3(from_bits(0x80000001u)), 0x80);
}

TEST(Fp8E5M2, HandCheckedValues) {
  EXPECT_EQ(float_to_fp8_e5m2(1.0f), 0x3c);
  EXPECT_EQ(float_to_fp8_e5m2(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e5m2(1.125f), 0x3c);  // tie -> even 1.0
  EXPECT_EQ(float_to_fp8_e5m2(1.375f), 0x3e);  // tie -> even 1.5
  EXPECT_EQ(float_to_fp8_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(61440.0f), 0x7b);  // would round to 65536 (inf): saturates
  EXPECT_EQ(float_to_fp8_e5m2(-1e20f), 0xfb);
  EXPECT_EQ(float_to_fp8_e5m2(kInf), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(-kInf), 0xfb);
  EXPECT_EQ(float_to_fp8_e5m2(from_bits(0x7fc00000u)), 0x7f);
  EXPECT_EQ(float_to_fp8_e5m2(from_bits(0xffffffffu)), 0x7f);
  // Target subnormals: quantum 2^-16, min normal 2^-14.
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(3.0f, -17)), 0x02);
  EXPECT_EQ(float_to_fp8_e5m2(-std::ldexp(3.0f, -16)), 0x83);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -14)), 0x04);
  EXPECT_EQ(float_to_fp8_e5m2(from_bits(0x00000001u)), 0x00);
  EXPECT_EQ(float_to_fp8_e5m2(from_bits(0x80400000u)), 0x80);
}

// Independent decode: sign, exponent, mantissa fields through ldexp.
float decode_by_fields(uint8_t code, int mant_bits, int bias) {
  const int exponent = (code & 0x7f) >> mant_bits;
  const int mantissa = code & ((1 << mant_bits) - 1);
  const float frac = static_cast<float>(mantissa) / static_cast<float>(1 << mant_bits);
  const float magnitude =
      exponent == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0f + frac, exponent - bias);
  return (code & 0x80) ? -magnitude : magnitude;
}

TEST(Fp8E4M3, DecodeOfEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float got = fp8_e4m3_to_float(code);
    if ((c & 0x7f) == 0x7f) {
      EXPECT_EQ(float_to_bits(got), 0x7fffffffu) << std::hex << c;
      continue;
    }
    EXPECT_EQ(float_to_bits(got), float_to_bits(decode_by_fields(code, 3, 7))) << std::hex << c;
    EXPECT_EQ(float_to_fp8_e4m3(got), code) << std::hex << c;
  }
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));
}

TEST(Fp8E5M2, DecodeOfEveryCode) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float got = fp8_e5m2_to_float(code);
    if ((c & 0x7c) == 0x7c) {
      if ((c & 0x3) == 0) {
        EXPECT_EQ(got, (c & 0x80) ? -kInf : kInf) << std::hex << c;
      } else {
        EXPECT_EQ(float_to_bits(got), 0x7fffffffu) << std::hex << c;
      }
      continue;
    }
    EXPECT_EQ(float_to_bits(got), float_to_bits(decode_by_fields(code, 2, 15))) << std::hex << c;
    EXPECT_EQ(float_to_fp8_e5m2(got), code) << std::hex << c;
  }
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), 57344.0f);
}

// The two-term split of the Hopper prefill's FP8 P·V (x = P * 256 in [0, 256]): hi on the e4m3
// grid and stored exactly (x >= 2^-6), x - hi exact and <= 2^-4 x, hi + e4m3(x - hi) within
// 2^-8 x for x >= 2^-2 and 2^-9 absolute below (2^-10 down to 2^-6, where hi is exact; below,
// hi's own e4m3 rounding adds up to 2^-10); every 7th float of [2^-12, 256] and the hand cases.
TEST(Fp8E4M3, LeadingValueSplitsIntoTwoTerms) {
  EXPECT_EQ(fp8_e4m3_leading_value(0.0f), 0.0f);
  EXPECT_EQ(fp8_e4m3_leading_value(256.0f), 256.0f);
  EXPECT_EQ(fp8_e4m3_leading_value(1.0625f), 1.125f);  // tie: away from zero
  EXPECT_EQ(fp8_e4m3_leading_value(1.06249f), 1.0f);
  EXPECT_EQ(fp8_e4m3_leading_value(1.9375f), 2.0f);  // carries into the exponent
  EXPECT_EQ(fp8_e4m3_leading_value(-1.3f), -1.25f);
  int checked = 0;
  for (uint32_t bits = float_to_bits(0x1p-12f); bits <= float_to_bits(256.0f); bits += 7) {
    const float x = bits_to_float(bits);
    const float hi = fp8_e4m3_leading_value(x);
    const float lo = x - hi;
    ASSERT_EQ(static_cast<double>(hi) + static_cast<double>(lo), static_cast<double>(x)) << x;
    ASSERT_LE(std::fabs(lo), 0x1p-4f * x) << x;
    if (x >= 0x1p-6f) {
      ASSERT_EQ(fp8_e4m3_to_float(float_to_fp8_e4m3(hi)), hi) << x;
    }
    const float two_term =
        fp8_e4m3_to_float(float_to_fp8_e4m3(hi)) + fp8_e4m3_to_float(float_to_fp8_e4m3(lo));
    const float bound = x >= 0x1p-2f ? 0x1p-8f * x : (x >= 0x1p-6f ? 0x1p-10f : 0x1p-9f);
    ASSERT_LE(std::fabs(two_term - x), bound) << x;
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
}

TEST(Fp8, FormatDispatchAndDtypeMapping) {
  EXPECT_EQ(float_to_fp8(448.0f, Fp8Format::kE4M3), 0x7e);
  EXPECT_EQ(float_to_fp8(57344.0f, Fp8Format::kE5M2), 0x7b);
  EXPECT_EQ(fp8_to_float(0x38, Fp8Format::kE4M3), 1.0f);
  EXPECT_EQ(fp8_to_float(0x3c, Fp8Format::kE5M2), 1.0f);
  EXPECT_EQ(fp8_max(Fp8Format::kE4M3), 448.0f);
  EXPECT_EQ(fp8_max(Fp8Format::kE5M2), 57344.0f);
  EXPECT_EQ(fp8_format_of(DType::kFP8E4M3), Fp8Format::kE4M3);
  EXPECT_EQ(fp8_format_of(DType::kFP8E5M2), Fp8Format::kE5M2);
  try {
    fp8_format_of(DType::kBF16);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp8_e4m3, fp8_e5m2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace quench
