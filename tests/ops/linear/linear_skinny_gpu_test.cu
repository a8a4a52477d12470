// The weight-streaming linear kernel (1 to 8 tokens) against linear_reference on random inputs:
// every token count, input widths of one vector up to the 8B model's down projection, feature
// counts that leave warps and CTAs partly idle, both output dtypes; and linear_cuda, whichever
// kernel QUENCH_LINEAR gives it (ctest runs these tests again with QUENCH_LINEAR=skinny).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "harness/linear_expectations.h"
#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/linear/linear_skinny.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;
using testing_support::expect_linear_matches_reference;

TEST(LinearSkinnyGpu, EveryTokenCountMatchesTheReference) {
  uint32_t seed = 1;
  for (int32_t tokens = 1; tokens <= kSkinnyLinearMaxTokens; ++tokens) {
    for (const auto& [in, out] : std::vector<std::pair<int32_t, int32_t>>{
             {8, 3}, {64, 1}, {328, 200}, {2048, 37}, {8192, 96}, {14336, 9}}) {
      expect_linear_matches_reference(
          tokens, in, out, seed += 2,
          [](int32_t t, int32_t i, int32_t o, const uint16_t* x, const uint16_t* w, void* y,
             DType d) { linear_skinny_cuda(t, i, o, x, w, y, d, nullptr); });
    }
  }
}

// More features than the grid has warps (each warp strides over several), as in lm_head.
TEST(LinearSkinnyGpu, ManyFeaturesMatchTheReference) {
  expect_linear_matches_reference(
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
  expect_linear_matches_reference(2, 36, 50, 7, through_linear_cuda);
  expect_linear_matches_reference(4, 512, 300, 9, through_linear_cuda);
  expect_linear_matches_reference(12, 512, 300, 11, through_linear_cuda);
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
