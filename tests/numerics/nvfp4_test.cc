// NVFP4: e2m1 conversions by hand, the 128x4 scale swizzle against SPEC §1.3 by hand and as a
// bijection, and the row quantize/dequantize reference (packing, scale placement, error bound).
#include "quench/numerics/nvfp4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/nvfp4_quantize.h"

namespace quench {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(E2m1, HandCheckedValues) {
  EXPECT_EQ(float_to_e2m1(0.0f), 0x0);
  EXPECT_EQ(float_to_e2m1(-0.0f), 0x8);
  EXPECT_EQ(float_to_e2m1(0.5f), 0x1);
  EXPECT_EQ(float_to_e2m1(-1.5f), 0xb);
  EXPECT_EQ(float_to_e2m1(6.0f), 0x7);
  EXPECT_EQ(float_to_e2m1(-6.0f), 0xf);
  // Ties to even code: 0.25 -> 0, 0.75 -> 1.0 (code 2), 1.25 -> 1.0, 1.75 -> 2.0 (code 4),
  // 2.5 -> 2.0, 3.5 -> 4.0 (code 6), 5 -> 4.0 (code 6).
  EXPECT_EQ(float_to_e2m1(0.25f), 0x0);
  EXPECT_EQ(float_to_e2m1(std::nextafter(0.25f, 1.0f)), 0x1);
  EXPECT_EQ(float_to_e2m1(0.75f), 0x2);
  EXPECT_EQ(float_to_e2m1(1.25f), 0x2);
  EXPECT_EQ(float_to_e2m1(1.75f), 0x4);
  EXPECT_EQ(float_to_e2m1(2.5f), 0x4);
  EXPECT_EQ(float_to_e2m1(3.5f), 0x6);
  EXPECT_EQ(float_to_e2m1(-5.0f), 0xe);
  EXPECT_EQ(float_to_e2m1(std::nextafter(5.0f, 6.0f)), 0x7);
  // Saturation, infinities and NaN (either sign -> +6, code 0x7).
  EXPECT_EQ(float_to_e2m1(7.0f), 0x7);
  EXPECT_EQ(float_to_e2m1(1e30f), 0x7);
  EXPECT_EQ(float_to_e2m1(kInf), 0x7);
  EXPECT_EQ(float_to_e2m1(-kInf), 0xf);
  EXPECT_EQ(float_to_e2m1(bits_to_float(0x7fc00000u)), 0x7);
  EXPECT_EQ(float_to_e2m1(bits_to_float(0xffc00000u)), 0x7);
  // fp32 subnormals vanish, keeping the sign.
  EXPECT_EQ(float_to_e2m1(bits_to_float(0x00000001u)), 0x0);
  EXPECT_EQ(float_to_e2m1(bits_to_float(0x807fffffu)), 0x8);
}

TEST(E2m1, DecodeOfEveryCodeAndRoundTrip) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 16; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float expected = (c & 8) ? -magnitudes[c & 7] : magnitudes[c & 7];
    EXPECT_EQ(float_to_bits(e2m1_to_float(code)), float_to_bits(expected)) << c;
    EXPECT_EQ(float_to_e2m1(e2m1_to_float(code)), code) << c;
  }
}

TEST(Nvfp4ScaleSwizzle, OffsetsByHand) {
  // 12 scale columns -> 3 column tiles of 4; a 128x4 tile is 512 bytes.
  EXPECT_EQ(nvfp4_scale_offset(0, 0, 12), 0);
  EXPECT_EQ(nvfp4_scale_offset(0, 3, 12), 3);
  EXPECT_EQ(nvfp4_scale_offset(0, 4, 12), 512);
  EXPECT_EQ(nvfp4_scale_offset(1, 0, 12), 16);
  EXPECT_EQ(nvfp4_scale_offset(31, 0, 12), 496);
  EXPECT_EQ(nvfp4_scale_offset(32, 0, 12), 4);
  EXPECT_EQ(nvfp4_scale_offset(33, 2, 12), 22);
  EXPECT_EQ(nvfp4_scale_offset(127, 3, 12), 511);
  EXPECT_EQ(nvfp4_scale_offset(128, 0, 12), 1536);
  EXPECT_EQ(nvfp4_scale_offset(130, 5, 12), 2081);
  EXPECT_EQ(nvfp4_scale_offset(199, 11, 12), 2683);
  // 10 columns pad to 12: same layout.
  EXPECT_EQ(nvfp4_scale_offset(199, 9, 10), nvfp4_scale_offset(199, 9, 12));
  EXPECT_EQ(nvfp4_scale_bytes(200, 12), 256 * 12);
  EXPECT_EQ(nvfp4_scale_bytes(200, 10), 256 * 12);
  EXPECT_EQ(nvfp4_scale_bytes(1, 1), 128 * 4);
}

TEST(Nvfp4ScaleSwizzle, IsABijectionOntoThePaddedTensor) {
  for (int64_t cols : {12, 10, 1}) {
    const int64_t rows = 200;
    const int64_t bytes = nvfp4_scale_bytes(rows, cols);
    const int64_t padded_rows = 256, padded_cols = (cols + 3) / 4 * 4;
    std::vector<int> hits(static_cast<size_t>(bytes), 0);
    for (int64_t r = 0; r < padded_rows; ++r) {
      for (int64_t c = 0; c < padded_cols; ++c) {
        const int64_t offset = nvfp4_scale_offset(r, c, cols);
        ASSERT_GE(offset, 0);
        ASSERT_LT(offset, bytes) << "row " << r << " col " << c;
        ++hits[static_cast<size_t>(offset)];
      }
    }
    for (int64_t i = 0; i < bytes; ++i)
      ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << i;
  }
}

TEST(Nvfp4QuantizeRow, HandCheckedBlock) {
  // amax 6, gs 4: block scale e4m3(6 * 4 / 6) = 4.0 (0x48), element factor 4 / 4 = 1.
  std::vector<float> x = {6.0f,  -0.5f, 0.75f, 5.0f, -0.25f, 2.5f, 1.25f, 0.1f,
                          -3.0f, 1.5f,  0.0f,  4.0f, -6.0f,  1.0f, 3.5f,  -2.0f};
  std::vector<uint8_t> packed(8, 0xee);
  std::vector<uint8_t> scales(static_cast<size_t>(nvfp4_scale_bytes(1, 1)), 0xab);
  nvfp4_quantize_row(x.data(), 16, 4.0f, packed.data(), scales.data(), 0, 1);
  EXPECT_EQ(scales[0], 0x48);
  const std::vector<uint8_t> expected = {0x97, 0x62, 0x48, 0x02, 0x3d, 0x60, 0x2f, 0xc6};
  EXPECT_EQ(packed, expected);
  for (size_t i = 1; i < scales.size(); ++i)
    ASSERT_EQ(scales[i], 0xab) << i;
  std::vector<float> back(16, NAN);
  nvfp4_dequantize_row(packed.data(), 16, 4.0f, scales.data(), 0, 1, back.data());
  const std::vector<float> expected_back = {6.0f,  -0.5f, 1.0f, 4.0f, -0.0f, 2.0f, 1.0f, 0.0f,
                                            -3.0f, 1.5f,  0.0f, 4.0f, -6.0f, 1.0f, 4.0f, -2.0f};
  EXPECT_EQ(back, expected_back);
}

TEST(Nvfp4QuantizeRow, RoundTripWithinTheBlockErrorBound) {
  testing_support::RandomInputs random(7);
  const int64_t rows = 200, n = 160, cols = n / kNvfp4BlockSize;
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    // Rows with very different magnitudes, so block scales span many e4m3 exponents.
    const float magnitude = std::ldexp(1.0f, static_cast<int>(r % 9) - 4);
    const auto row = random.normal(static_cast<size_t>(n), 0.3f, 2.0f * magnitude);
    std::copy(row.begin(), row.end(), x.begin() + r * n);
  }
  float amax = 0.0f;
  for (float v : x)
    amax = std::max(amax, std::fabs(v));
  const float gs = 448.0f * 6.0f / amax;
  std::vector<uint8_t> packed(static_cast<size_t>(rows * n / 2), 0xee);
  std::vector<uint8_t> scales(static_cast<size_t>(nvfp4_scale_bytes(rows, cols)), 0);
  for (int64_t r = 0; r < rows; ++r) {
    nvfp4_quantize_row(&x[r * n], n, gs, &packed[r * n / 2], scales.data(), r, cols);
  }
  std::vector<float> back(x.size(), NAN);
  for (int64_t r = 0; r < rows; ++r) {
    nvfp4_dequantize_row(&packed[r * n / 2], n, gs, scales.data(), r, cols, &back[r * n]);
  }
  double worst_ratio = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols; ++b) {
      const uint8_t bs = scales[static_cast<size_t>(nvfp4_scale_offset(r, b, cols))];
      float block_amax = 0.0f;
      for (int64_t i = 0; i < kNvfp4BlockSize; ++i) {
        block_amax = std::max(block_amax, std::fabs(x[r * n + b * kNvfp4BlockSize + i]));
      }
      ASSERT_EQ(bs, nvfp4_block_scale(block_amax, gs)) << "row " << r << " block " << b;
      // The largest e2m1 half-step is 1 (between 4 and 6), in units of block_scale / gs; the
      // e4m3 rounding of the scale can push amax up to 6 * (1 + 2^-4), which saturates at 6
      // with an error below 1 unit as well.
      const double unit = fp8_e4m3_to_float(bs) / gs;
      for (int64_t i = 0; i < kNvfp4BlockSize; ++i) {
        const int64_t k = r * n + b * kNvfp4BlockSize + i;
        const double err = std::fabs(static_cast<double>(x[k]) - back[k]);
        worst_ratio = std::max(worst_ratio, err / unit);
        ASSERT_LE(err, unit * (1.0 + 1e-6))
            << "row " << r << " element " << b * 16 + i << " x=" << x[k] << " back=" << back[k];
      }
    }
  }
  EXPECT_GT(worst_ratio, 0.25);  // the bound is not vacuous: real rounding happened
}

TEST(Nvfp4QuantizeRow, WritesOnlyItsRowOfScales) {
  testing_support::RandomInputs random(11);
  const int64_t n = 64, cols = 4, rows = 140, row = 130;
  const auto x = random.uniform(static_cast<size_t>(n), -3.0f, 3.0f);
  std::vector<uint8_t> packed(static_cast<size_t>(n / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(nvfp4_scale_bytes(rows, cols)), 0xab);
  nvfp4_quantize_row(x.data(), n, 0.7f, packed.data(), scales.data(), row, cols);
  std::set<int64_t> written;
  for (int64_t c = 0; c < cols; ++c)
    written.insert(nvfp4_scale_offset(row, c, cols));
  for (int64_t i = 0; i < static_cast<int64_t>(scales.size()); ++i) {
    if (written.count(i)) {
      EXPECT_NE(scales[static_cast<size_t>(i)], 0xab) << i;
    } else {
      ASSERT_EQ(scales[static_cast<size_t>(i)], 0xab) << i;
    }
  }
}

TEST(Nvfp4QuantizeRow, RejectsBadArguments) {
  std::vector<float> x(32, 1.0f);
  std::vector<uint8_t> packed(16), scales(512);
  EXPECT_QUENCH_ERROR(nvfp4_quantize_row(x.data(), 24, 1.0f, packed.data(), scales.data(), 0, 2),
                      {"n=24 must be a positive multiple of 16"});
  EXPECT_QUENCH_ERROR(nvfp4_quantize_row(x.data(), 32, 0.0f, packed.data(), scales.data(), 0, 2),
                      {"global_scale 0 must be finite and > 0"});
  EXPECT_QUENCH_ERROR(nvfp4_quantize_row(x.data(), 32, 1.0f, packed.data(), scales.data(), 0, 3),
                      {"num_scale_cols=3 must equal n / 16 = 2"});
  EXPECT_QUENCH_ERROR(nvfp4_dequantize_row(packed.data(), 32, 1.0f, scales.data(), -1, 2, x.data()),
                      {"scale_row -1 must be >= 0"});
}

}  // namespace
}  // namespace quench
