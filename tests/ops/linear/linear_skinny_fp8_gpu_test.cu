// The weight-streaming linear kernel over FP8 e4m3 weights (linear_skinny.h's LinearWeight form)
// against linear_fp8_weight_reference on random inputs with non-unit scales: every token count,
// each scaling (per tensor, per channel, blocks of 128 x 128 and of 48 x 64 that do not divide
// the shape), widths from one 16-weight vector up to the 8B model's down projection, feature
// counts that leave warps idle and that make each warp stride; and the shapes and weights it
// refuses.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "harness/device_buffer.h"
#include "harness/expect_error.h"
#include "harness/linear_expectations.h"
#include "quench/ops/linear/linear_skinny.h"

namespace quench {
namespace {

using testing_support::DeviceBuffer;
using testing_support::expect_fp8_linear_matches_reference;
using testing_support::Fp8TestWeight;

void skinny(int32_t t, int32_t i, int32_t o, const uint16_t* x, const LinearWeight& w, void* y,
            DType d) {
  linear_skinny_cuda(t, i, o, x, w, y, d, nullptr);
}

struct Scaling {
  WeightScaling scaling;
  int32_t block_out, block_in;
};
const Scaling kScalings[] = {{WeightScaling::kTensor, 0, 0},
                             {WeightScaling::kChannel, 0, 0},
                             {WeightScaling::kBlock, 128, 128},
                             {WeightScaling::kBlock, 48, 64}};

TEST(LinearSkinnyFp8Gpu, EveryTokenCountAndScalingMatchesTheReference) {
  uint32_t seed = 11;
  for (const Scaling& s : kScalings) {
    for (const auto& [in, out] : std::vector<std::pair<int32_t, int32_t>>{
             {16, 3}, {128, 1}, {336, 200}, {2048, 37}, {8192, 96}}) {
      const Fp8TestWeight w(out, in, s.scaling, s.block_out, s.block_in, seed += 2);
      for (int32_t tokens = 1; tokens <= kSkinnyLinearMaxTokens; ++tokens)
        expect_fp8_linear_matches_reference(tokens, w, seed += 2, skinny);
    }
  }
}

// More features than the grid has warps (each warp strides over several), as in lm_head.
TEST(LinearSkinnyFp8Gpu, ManyFeaturesMatchTheReference) {
  const Fp8TestWeight channel(70001, 256, WeightScaling::kChannel, 0, 0, 91);
  expect_fp8_linear_matches_reference(3, channel, 93, skinny);
  const Fp8TestWeight blocks(9000, 4096, WeightScaling::kBlock, 128, 128, 95);
  expect_fp8_linear_matches_reference(1, blocks, 97, skinny);
}

TEST(LinearSkinnyFp8Gpu, RejectsWhatItDoesNotTake) {
  DeviceBuffer x(1 << 14), w(1 << 14), scales(1 << 10), y(1 << 14);
  LinearWeight fp8;
  fp8.dtype = DType::kFP8E4M3;
  fp8.data = w.as<void>();
  fp8.scales = scales.as<float>();
  const auto run = [&](int32_t in, const LinearWeight& weight) {
    linear_skinny_cuda(1, in, 4, x.as<uint16_t>(), weight, y.as<void>(), DType::kBF16, nullptr);
  };
  EXPECT_QUENCH_ERROR(run(40, fp8), {"40 inputs", "16 for FP8 weights"});
  LinearWeight no_scales = fp8;
  no_scales.scales = nullptr;
  EXPECT_QUENCH_ERROR(run(64, no_scales), {"needs its scales", "per tensor"});
  LinearWeight odd_blocks = fp8;
  odd_blocks.scaling = WeightScaling::kBlock;
  odd_blocks.block_out = 128;
  odd_blocks.block_in = 96;
  EXPECT_QUENCH_ERROR(run(64, odd_blocks), {"128 x 96", "a power of two >= 16"});
  LinearWeight e5m2 = fp8;
  e5m2.dtype = DType::kFP8E5M2;
  EXPECT_QUENCH_ERROR(run(64, e5m2), {"fp8_e5m2", "allowed: bf16, fp8_e4m3"});
  EXPECT_FALSE(linear_skinny_supported(1, 40, x.as<void>(), fp8));
  EXPECT_TRUE(linear_skinny_supported(1, 48, x.as<void>(), fp8));
}

}  // namespace
}  // namespace quench
