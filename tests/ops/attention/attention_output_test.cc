// Output rows: writing then reading gives the value rounded to the stored format, with o_scale
// dividing on the way in and multiplying on the way out.
#include "quench/ops/attention/attention_output.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quench/core/error.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"

namespace quench {
namespace {

std::vector<float> sample_row(int64_t n) {
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    row[i] = std::sin(0.7f * static_cast<float>(i)) * 3.0f;
  return row;
}

TEST(AttentionOutput, Bf16RoundTrip) {
  AttentionOutputFormat f;
  f.row_elems = 32;
  const std::vector<float> row = sample_row(32);
  std::vector<uint8_t> out(static_cast<size_t>(3 * attention_output_row_bytes(f)), 0);
  write_attention_output_row(f, 2, row.data(), out.data(), nullptr);
  std::vector<float> back(32);
  read_attention_output_row(f, 2, out.data(), nullptr, back.data());
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(back[i], to_float(to_bf16(row[i])));
  for (int64_t i = 0; i < 2 * attention_output_row_bytes(f); ++i)
    EXPECT_EQ(out[i], 0);
}

TEST(AttentionOutput, Fp8DividesThenMultipliesByOScale) {
  for (DType dtype : {DType::kFP8E4M3, DType::kFP8E5M2}) {
    AttentionOutputFormat f;
    f.dtype = dtype;
    f.row_elems = 32;
    f.o_scale = 0.01f;
    const std::vector<float> row = sample_row(32);
    std::vector<uint8_t> out(32);
    write_attention_output_row(f, 0, row.data(), out.data(), nullptr);
    std::vector<float> back(32);
    read_attention_output_row(f, 0, out.data(), nullptr, back.data());
    const Fp8Format fp8 = fp8_format_of(dtype);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(out[i], float_to_fp8(row[i] / 0.01f, fp8));
      EXPECT_EQ(back[i], fp8_to_float(out[i], fp8) * 0.01f);
    }
  }
}

TEST(AttentionOutput, Nvfp4WritesItsScaleRow) {
  AttentionOutputFormat f;
  f.dtype = DType::kNVFP4;
  f.row_elems = 64;  // 4 scale columns
  f.scale_row_offset = 127;
  f.nvfp4_global_scale = 448.0f * 6.0f / 3.0f;
  const std::vector<float> row = sample_row(64);
  std::vector<uint8_t> out(2 * 32, 0);
  std::vector<uint8_t> scales(static_cast<size_t>(nvfp4_scale_bytes(256, 4)), 0);
  write_attention_output_row(f, 1, row.data(), out.data(), scales.data());  // scale row 128
  for (int64_t c = 0; c < 4; ++c)
    EXPECT_NE(scales[nvfp4_scale_offset(128, c, 4)], 0);
  int nonzero = 0;
  for (uint8_t s : scales)
    nonzero += s != 0;
  EXPECT_EQ(nonzero, 4);
  std::vector<float> back(64);
  read_attention_output_row(f, 1, out.data(), scales.data(), back.data());
  for (int i = 0; i < 64; ++i)
    EXPECT_NEAR(back[i], row[i], 0.55f) << i;  // <= one e2m1 unit
}

TEST(AttentionOutput, RejectsOtherDtypes) {
  AttentionOutputFormat f;
  f.dtype = DType::kF32;
  f.row_elems = 16;
  float row[16] = {};
  uint8_t out[64] = {};
  try {
    write_attention_output_row(f, 0, row, out, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bf16, fp8_e4m3, fp8_e5m2, nvfp4"), std::string::npos);
  }
  EXPECT_THROW(read_attention_output_row(f, 0, out, nullptr, row), Error);
}

}  // namespace
}  // namespace quench
