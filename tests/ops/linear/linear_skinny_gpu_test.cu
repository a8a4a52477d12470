// The weight-streaming linear kernel (1 to 8 tokens) against linear_reference on random inputs:
// every token count, input widths of one vector up to the 8B model's down projection, feature
// counts that leave warps and CTAs partly idle, both output dtypes; and linear_cuda, whichever
// kernel QUENCH_LINEAR gives it (ctest runs these tests again with QUENCH_LINEAR=skinny).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "harness/random_inputs.h"
#include "quench/numerics/bf16.h"
#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/linear/linear_reference.h"
#include "quench/ops/linear/linear_skinny.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;

// bf16 values from N(0.1, stddev): a mean, so that the sums do not cancel to ~0.
std::vector<uint16_t> random_bf16(size_t n, float stddev, uint64_t seed) {
  std::vector<uint16_t> v;
  for (float f : testing_support::RandomInputs(seed).normal(n, 0.1f, stddev))
    v.push_back(float_to_bf16_bits(f));
  return v;
}

// Runs `linear` (bf16 and f32 outputs) on tokens x in -> out and checks both against the
// reference. fp32: the sums differ from the reference's by their order only, so within
// 4 sqrt(in) fp32 epsilons of the sum of the terms' magnitudes (a dropped or doubled vector of 8
// terms is ~100x that). bf16: one rounding of the fp32 result more.
template <typename Linear>
void expect_matches_reference(int32_t tokens, int32_t in, int32_t out_features, uint32_t seed,
                              Linear&& linear) {
  const auto x = random_bf16(static_cast<size_t>(tokens) * in, 1.0f, seed);
  const auto w = random_bf16(static_cast<size_t>(out_features) * in, 0.05f, seed + 1);
  std::vector<float> xf(x.size()), wf(w.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = bf16_bits_to_float(x[i]);
  for (size_t i = 0; i < w.size(); ++i)
    wf[i] = bf16_bits_to_float(w[i]);
  std::vector<float> want(static_cast<size_t>(tokens) * out_features);
  linear_reference(tokens, in, out_features, xf.data(), w.data(), want.data());
  const DeviceBuffer dx = DeviceBuffer::from_host(x), dw = DeviceBuffer::from_host(w);
  const DeviceBuffer y16(want.size() * 2), y32(want.size() * 4);
  linear(tokens, in, out_features, dx.as<uint16_t>(), dw.as<uint16_t>(), y16.as<void>(),
         DType::kBF16);
  linear(tokens, in, out_features, dx.as<uint16_t>(), dw.as<uint16_t>(), y32.as<void>(),
         DType::kF32);
  QUENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got16 = y16.to_host<uint16_t>();
  const std::vector<float> got32 = y32.to_host<float>();
  const double eps = 4.0 * std::sqrt(static_cast<double>(in)) * 5.96e-8;
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t o = 0; o < out_features; ++o) {
      double magnitude = 0.0;
      for (int32_t k = 0; k < in; ++k)
        magnitude += std::abs(static_cast<double>(xf[static_cast<size_t>(t) * in + k]) *
                              wf[static_cast<size_t>(o) * in + k]);
      const size_t i = static_cast<size_t>(t) * out_features + o;
      const double tol = eps * magnitude + 1e-7;
      ASSERT_NEAR(got32[i], want[i], tol)
          << tokens << " x " << in << " -> " << out_features << " at " << i;
      ASSERT_NEAR(bf16_bits_to_float(got16[i]), want[i], std::abs(want[i]) * 0.0039 + tol)
          << tokens << " x " << in << " -> " << out_features << " at " << i << " (bf16)";
    }
  }
}

TEST(LinearSkinnyGpu, EveryTokenCountMatchesTheReference) {
  uint32_t seed = 1;
  for (int32_t tokens = 1; tokens <= kSkinnyLinearMaxTokens; ++tokens) {
    for (const auto& [in, out] : std::vector<std::pair<int32_t, int32_t>>{
             {8, 3}, {64, 1}, {328, 200}, {2048, 37}, {8192, 96}, {14336, 9}}) {
      expect_matches_reference(
          tokens, in, out, seed += 2,
          [](int32_t t, int32_t i, int32_t o, const uint16_t* x, const uint16_t* w, void* y,
             DType d) { linear_skinny_cuda(t, i, o, x, w, y, d, nullptr); });
    }
  }
}

// More features than the grid has warps (each warp strides over several), as in lm_head.
TEST(LinearSkinnyGpu, ManyFeaturesMatchTheReference) {
  expect_matches_reference(
      3, 256, 70001, 99,
      [](int32_t t, int32_t i, int32_t o, const uint16_t* x, const uint16_t* w, void* y, DType d) {
        linear_skinny_cuda(t, i, o, x, w, y, d, nullptr);
      });
}

// linear_cuda: under QUENCH_LINEAR=skinny the skinny kernel for few tokens, cuBLAS for widths it
// does not take (36 inputs: not whole vectors) and for more tokens; cuBLAS for all by default.
// The results agree with the reference either way.
TEST(LinearSkinnyGpu, LinearCudaPicksAKernelThatMatchesTheReference) {
  const CublasHandle cublas;
  const auto through_linear_cuda = [&](int32_t t, int32_t i, int32_t o, const uint16_t* x,
                                       const uint16_t* w, void* y, DType d) {
    linear_cuda(cublas, t, i, o, x, w, y, d, nullptr);
  };
  expect_matches_reference(2, 36, 50, 7, through_linear_cuda);
  expect_matches_reference(4, 512, 300, 9, through_linear_cuda);
  expect_matches_reference(12, 512, 300, 11, through_linear_cuda);
}

TEST(LinearSkinnyGpu, RejectsShapesItDoesNotTake) {
  DeviceBuffer x(4096), w(4096), y(4096);
  EXPECT_QUENCH_ERROR(linear_skinny_cuda(9, 64, 4, x.as<uint16_t>(), w.as<uint16_t>(), y.as<void>(),
                                         DType::kBF16, nullptr),
                      {"9 tokens", "1 to 8 tokens"});
  EXPECT_QUENCH_ERROR(linear_skinny_cuda(1, 36, 4, x.as<uint16_t>(), w.as<uint16_t>(), y.as<void>(),
                                         DType::kBF16, nullptr),
                      {"36 inputs", "a multiple of 8"});
  EXPECT_QUENCH_ERROR(linear_skinny_cuda(1, 64, 4, x.as<uint16_t>(), w.as<uint16_t>(), y.as<void>(),
                                         DType::kFP8E4M3, nullptr),
                      {"fp8_e4m3", "allowed: bf16, f32"});
}

}  // namespace
}  // namespace quench
