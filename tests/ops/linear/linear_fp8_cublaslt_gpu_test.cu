// The FP8 GEMM over FP8 weights (linear_fp8_cublaslt.h): activations quantized on the GPU per
// token (quantize_fp8_dynamic.h), multiplied by cuBLASLt, against linear_fp8_weight_reference
// over the dequantized activations, per-channel weight scales (on the outer-vector kernels, and
// with their group_scales on the 128-column block-scaled ones) and 128 x 128 block weight scales
// (block-scaled kernels: activation scales per 128 columns, group-major, token counts padded to 8
// with zero rows), token counts of decode batches and a prefill chunk, both output dtypes;
// per-tensor scales, other blocks and ragged token counts on the block-scaled kernels are refused.
// The FP8 tensor cores sum 32 products at a time before their fp32 accumulation, so the bound is
// looser than the fp32 kernels': 2^-10 of the sum of the terms' magnitudes (a wrong scale index or
// layout is off by the terms themselves).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "harness/linear_expectations.h"
#include "quench/core/parallel_for.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/linear/linear_fp8_cublaslt.h"
#include "quench/ops/quantize/fp8_quantize_reference.h"
#include "quench/ops/quantize/quantize_fp8_dynamic.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;
using testing_support::Fp8TestWeight;
using testing_support::random_linear_bf16;

// `weight` is w.device(), or that with group_scales.
void expect_matches_reference(const Fp8Gemm& gemm, int32_t tokens, const Fp8TestWeight& w,
                              const LinearWeight& weight, uint64_t seed) {
  const bool blockwise = fp8_gemm_blockwise(weight, tokens, w.in, w.out);
  SCOPED_TRACE(::testing::Message()
               << tokens << " x " << w.in << " -> " << w.out << " "
               << weight_scaling_name(w.scaling) << (blockwise ? " (block-scaled kernels)" : ""));
  const int32_t padded = blockwise ? (tokens + 7) / 8 * 8 : tokens;
  ASSERT_TRUE(gemm.supports(padded, w.in, w.out, weight, DType::kBF16));
  const auto x = random_linear_bf16(static_cast<size_t>(tokens) * w.in, 1.0f, seed);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = bf16_bits_to_float(x[i]);
  const int32_t group = fp8_activation_group(weight, tokens, w.in, w.out);
  std::vector<uint8_t> xq(x.size());
  std::vector<float> sx(static_cast<size_t>(tokens) * (w.in / group));
  quantize_fp8_dynamic_rows_reference(xf.data(), tokens, w.in, group, xq.data(), sx.data());
  std::vector<float> xd(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xd[i] =
        fp8_e4m3_to_float(xq[i]) *
        sx[i / static_cast<size_t>(w.in) * (w.in / group) + i % static_cast<size_t>(w.in) / group];
  const std::vector<float> want = w.reference(tokens, xd);

  // Block-scaled kernels: the rows padded to 8 (zeros, scale 1) and the scales group-major.
  const DeviceBuffer dx = DeviceBuffer::from_host(x);
  const DeviceBuffer dxq(static_cast<size_t>(padded) * w.in),
      dsx(static_cast<size_t>(padded) * (w.in / group) * 4);
  Fp8DynamicLayout layout;
  layout.padded_rows = padded;
  layout.scales_by_group = blockwise;
  quantize_fp8_dynamic_rows_cuda(tokens, w.in, group, dx.as<uint16_t>(), dxq.as<uint8_t>(),
                                 dsx.as<float>(), layout, nullptr);
  const DeviceBuffer y16(static_cast<size_t>(padded) * w.out * 2),
      y32(static_cast<size_t>(padded) * w.out * 4);
  gemm.run(padded, w.in, w.out, dxq.as<uint8_t>(), dsx.as<float>(), weight, y16.as<void>(),
           DType::kBF16, nullptr);
  gemm.run(padded, w.in, w.out, dxq.as<uint8_t>(), dsx.as<float>(), weight, y32.as<void>(),
           DType::kF32, nullptr);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> got_xq = dxq.to_host<uint8_t>();
  got_xq.resize(xq.size());
  ASSERT_EQ(got_xq, xq);
  const std::vector<uint16_t> got16 = y16.to_host<uint16_t>();
  const std::vector<float> got32 = y32.to_host<float>();
  // The sums of the terms' magnitudes, on every host core (as the reference itself): tokens x in
  // x out in double took ~90 s of a GPU call on one core for this file's cases.
  std::vector<double> magnitudes(static_cast<size_t>(tokens) * w.out);
  parallel_for(tokens, [&](int64_t t) {
    for (int32_t o = 0; o < w.out; ++o) {
      double magnitude = 0.0;
      for (int32_t k = 0; k < w.in; ++k)
        magnitude += std::abs(static_cast<double>(xd[static_cast<size_t>(t) * w.in + k]) *
                              w.values[static_cast<size_t>(o) * w.in + k]);
      magnitudes[static_cast<size_t>(t) * w.out + o] = magnitude;
    }
  });
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t o = 0; o < w.out; ++o) {
      const size_t i = static_cast<size_t>(t) * w.out + o;
      const double tol = magnitudes[i] / 1024.0 + 1e-6;
      ASSERT_NEAR(got32[i], want[i], tol) << "at token " << t << ", output " << o;
      ASSERT_NEAR(bf16_bits_to_float(got16[i]), want[i], std::abs(want[i]) * 0.0039 + tol)
          << "at token " << t << ", output " << o << " (bf16)";
    }
  }
}

TEST(LinearFp8CublasltGpu, PerChannelWeightsMatchTheReference) {
  const Fp8Gemm gemm;
  uint64_t seed = 21;
  for (const auto& [in, out] :
       std::vector<std::pair<int32_t, int32_t>>{{256, 384}, {2048, 3072}, {1024, 200}}) {
    const Fp8TestWeight w(out, in, WeightScaling::kChannel, 0, 0, seed += 2);
    for (int32_t tokens : {3, 16, 32, 200})
      expect_matches_reference(gemm, tokens, w, w.device(), seed += 2);
  }
}

// With group_scales (as the runner uploads them where the input is a multiple of 512): the
// 128-column block-scaled kernels up to channel_groups_max_tokens (their K splits tuned up to 64),
// the outer-vector ones past it and for 256 inputs.
TEST(LinearFp8CublasltGpu, PerChannelWeightsOnBlockScaledKernelsMatchTheReference) {
  const Fp8Gemm gemm;
  uint64_t seed = 41;
  for (const auto& [in, out] : std::vector<std::pair<int32_t, int32_t>>{
           {256, 384}, {2048, 3072}, {1024, 200}, {8192, 512}, {4096, 640}}) {
    const Fp8TestWeight w(out, in, WeightScaling::kChannel, 0, 0, seed += 2);
    const DeviceBuffer group_scales =
        DeviceBuffer::from_host(channel_scales_by_group(w.scales, in));
    LinearWeight weight = w.device();
    weight.group_scales = group_scales.as<float>();
    for (int32_t tokens : {3, 8, 17, 32, 64, 128, 200, 256, 264})
      expect_matches_reference(gemm, tokens, w, weight, seed += 2);
  }
}

TEST(LinearFp8CublasltGpu, BlockWeightsMatchTheReference) {
  const Fp8Gemm gemm;
  uint64_t seed = 61;
  for (const auto& [in, out] :
       std::vector<std::pair<int32_t, int32_t>>{{512, 384}, {2048, 3072}, {1024, 200}}) {
    const Fp8TestWeight w(out, in, WeightScaling::kBlock, 128, 128, seed += 2);
    for (int32_t tokens : {3, 8, 17, 32, 200})
      expect_matches_reference(gemm, tokens, w, w.device(), seed += 2);
  }
}

TEST(LinearFp8CublasltGpu, RejectsWhatItDoesNotTake) {
  const Fp8Gemm gemm;
  DeviceBuffer x(1 << 14), s(1 << 10), w(1 << 14), y(1 << 14);
  LinearWeight fp8;
  fp8.dtype = DType::kFP8E4M3;
  fp8.data = w.as<void>();
  fp8.scales = s.as<float>();
  LinearWeight channel = fp8;
  channel.scaling = WeightScaling::kChannel;
  const auto run = [&](int32_t in, const LinearWeight& weight, DType out) {
    gemm.run(4, in, 16, x.as<uint8_t>(), s.as<float>(), weight, y.as<void>(), out, nullptr);
  };
  EXPECT_QUENCH_ERROR(run(40, channel, DType::kBF16), {"40 inputs", "a multiple of 16"});
  EXPECT_QUENCH_ERROR(run(64, channel, DType::kFP8E4M3), {"output dtype fp8_e4m3", "bf16, f32"});
  LinearWeight bf16 = channel;
  bf16.dtype = DType::kBF16;
  EXPECT_QUENCH_ERROR(run(64, bf16, DType::kBF16), {"the weight is bf16", "fp8_e4m3"});
  EXPECT_TRUE(gemm.supports(4, 64, 16, channel, DType::kBF16));
  EXPECT_QUENCH_ERROR(run(64, fp8, DType::kBF16), {"per tensor weight scales", "per channel"});
  EXPECT_FALSE(gemm.supports(4, 64, 16, fp8, DType::kBF16));
  LinearWeight blocks = fp8;
  blocks.scaling = WeightScaling::kBlock;
  blocks.block_out = 128;
  blocks.block_in = 128;
  EXPECT_QUENCH_ERROR(run(384, blocks, DType::kBF16), {"per block weight scales", "512"});
  EXPECT_FALSE(gemm.supports(8, 384, 16, blocks, DType::kBF16));
  EXPECT_QUENCH_ERROR(run(512, blocks, DType::kBF16), {"4 tokens", "a multiple of 8"});
  EXPECT_FALSE(gemm.supports(4, 512, 16, blocks, DType::kBF16));
  LinearWeight small_blocks = blocks;
  small_blocks.block_out = small_blocks.block_in = 64;
  EXPECT_FALSE(gemm.supports(8, 512, 16, small_blocks, DType::kBF16));
  // Per-channel weights on the block-scaled kernels take token counts a multiple of 8, as blocks
  // (unless QUENCH_FP8_CHANNEL_GEMM=outer keeps them off those kernels).
  LinearWeight channel_groups = channel;
  channel_groups.group_scales = s.as<float>();
  if (!fp8_gemm_blockwise(channel_groups, 4, 512, 16)) GTEST_SKIP() << "QUENCH_FP8_CHANNEL_GEMM";
  EXPECT_QUENCH_ERROR(run(512, channel_groups, DType::kBF16),
                      {"4 tokens", "per channel", "a multiple of 8"});
  EXPECT_FALSE(gemm.supports(4, 512, 16, channel_groups, DType::kBF16));
  EXPECT_TRUE(gemm.supports(8, 512, 16, channel_groups, DType::kBF16));
  EXPECT_TRUE(gemm.supports(4, 384, 16, channel_groups, DType::kBF16));  // outer vectors
}

}  // namespace
}  // namespace quench
