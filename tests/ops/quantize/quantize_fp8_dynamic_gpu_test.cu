// The dynamic FP8 quantization of activation rows (quantize_fp8_dynamic.h) against
// quantize_fp8_dynamic_rows_reference, bit for bit in codes and scales: per row and per 128
// columns, widths that leave threads of the last pass idle, rows of zeros (scale 1), values that
// span the bf16 range; and the shapes it refuses.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"
#include "quench/ops/quantize/quantize_fp8_dynamic.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;

void expect_matches_reference(int32_t rows, int32_t cols, int32_t group, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << rows << " x " << cols << " group " << group);
  std::vector<uint16_t> x;
  testing_support::RandomInputs random(seed);
  const std::vector<float> values = random.normal(static_cast<size_t>(rows) * cols, 0.0f, 1.0f);
  const std::vector<float> magnitudes = random.uniform(static_cast<size_t>(rows), -20.0f, 20.0f);
  for (size_t i = 0; i < values.size(); ++i) {
    const size_t row = i / static_cast<size_t>(cols);
    // Row 1 is all zeros; the others scaled by 2^[-20, 20).
    const float v = row == 1 ? 0.0f : values[i] * std::exp2(magnitudes[row]);
    x.push_back(float_to_bf16_bits(v));
  }
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = bf16_bits_to_float(x[i]);
  const int32_t groups = cols / group;
  std::vector<uint8_t> want(x.size());
  std::vector<float> want_scales(static_cast<size_t>(rows) * groups);
  quantize_fp8_dynamic_rows_reference(xf.data(), rows, cols, group, want.data(),
                                      want_scales.data());
  const DeviceBuffer dx = DeviceBuffer::from_host(x);
  const DeviceBuffer out(x.size()), scales(want_scales.size() * 4);
  quantize_fp8_dynamic_rows_cuda(rows, cols, group, dx.as<uint16_t>(), out.as<uint8_t>(),
                                 scales.as<float>(), nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(out.to_host<uint8_t>(), want);
  EXPECT_EQ(scales.to_host<float>(), want_scales);
}

TEST(QuantizeFp8DynamicGpu, RowsAndGroupsMatchTheReferenceBitForBit) {
  uint64_t seed = 5;
  for (int32_t rows : {2, 3, 33}) {
    for (int32_t cols : {8, 264, 2048, 14336})
      expect_matches_reference(rows, cols, cols, seed += 3);
    for (int32_t cols : {128, 384, 2048, 14336})
      expect_matches_reference(rows, cols, 128, seed += 3);
  }
}

// cuBLASLt's layout: rows padded (zeros, scale 1) and the scales group-major.
TEST(QuantizeFp8DynamicGpu, PaddedRowsAndGroupMajorScales) {
  const int32_t rows = 5, padded = 8, cols = 384, groups = 3;
  std::vector<uint16_t> x;
  for (float f :
       testing_support::RandomInputs(17).normal(static_cast<size_t>(rows) * cols, 0.0f, 3.0f))
    x.push_back(float_to_bf16_bits(f));
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = bf16_bits_to_float(x[i]);
  std::vector<uint8_t> want(static_cast<size_t>(padded) * cols, 0);
  std::vector<float> by_row(static_cast<size_t>(rows) * groups);
  quantize_fp8_dynamic_rows_reference(xf.data(), rows, cols, 128, want.data(), by_row.data());
  std::vector<float> want_scales(static_cast<size_t>(padded) * groups, 1.0f);
  for (int32_t r = 0; r < rows; ++r)
    for (int32_t g = 0; g < groups; ++g)
      want_scales[static_cast<size_t>(g * padded + r)] =
          by_row[static_cast<size_t>(r * groups + g)];
  const DeviceBuffer dx = DeviceBuffer::from_host(x);
  // Poisoned outputs: the padding must be written, not left.
  const DeviceBuffer out = DeviceBuffer::from_host(std::vector<uint8_t>(want.size(), 0x7f));
  const DeviceBuffer scales =
      DeviceBuffer::from_host(std::vector<float>(want_scales.size(), -1.0f));
  Fp8DynamicLayout layout;
  layout.padded_rows = padded;
  layout.scales_by_group = true;
  quantize_fp8_dynamic_rows_cuda(rows, cols, 128, dx.as<uint16_t>(), out.as<uint8_t>(),
                                 scales.as<float>(), layout, nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(out.to_host<uint8_t>(), want);
  EXPECT_EQ(scales.to_host<float>(), want_scales);
  // The reference's own group-major order agrees (without padding).
  std::vector<uint8_t> codes(x.size());
  std::vector<float> by_group(by_row.size());
  quantize_fp8_dynamic_rows_reference(xf.data(), rows, cols, 128, codes.data(), by_group.data(),
                                      /*scales_by_group=*/true);
  for (int32_t r = 0; r < rows; ++r)
    for (int32_t g = 0; g < groups; ++g)
      EXPECT_EQ(by_group[static_cast<size_t>(g * rows + r)],
                by_row[static_cast<size_t>(r * groups + g)]);
}

TEST(QuantizeFp8DynamicGpu, RejectsWhatItDoesNotTake) {
  DeviceBuffer x(1 << 14), out(1 << 14), scales(1 << 10);
  const auto run = [&](int32_t cols, int32_t group) {
    quantize_fp8_dynamic_rows_cuda(2, cols, group, x.as<uint16_t>(), out.as<uint8_t>(),
                                   scales.as<float>(), nullptr);
  };
  EXPECT_QUENCH_ERROR(run(12, 12), {"width 12", "a positive multiple of 8"});
  EXPECT_QUENCH_ERROR(run(192, 64), {"group 64", "or 128 where"});
  EXPECT_QUENCH_ERROR(run(200, 128), {"group 128 over 200", "a multiple of 128"});
  Fp8DynamicLayout short_padding;
  short_padding.padded_rows = 1;
  EXPECT_QUENCH_ERROR(
      quantize_fp8_dynamic_rows_cuda(2, 128, 128, x.as<uint16_t>(), out.as<uint8_t>(),
                                     scales.as<float>(), short_padding, nullptr),
      {"padded_rows 1", ">= rows"});
}

}  // namespace
}  // namespace quench
