// A per-channel FP8 weight's scales laid out for the FP8 GEMM's 128-column block-scaled kernels
// (channel_scales_by_group): each channel's scale once per 128-column group, group-major, so that
// the block-scaled product is the per-channel one exactly. A wrong layout would give each output
// row other rows' scales, which the GPU test sees as sums off by the terms; this pins the layout
// itself and which weights take those kernels, without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "harness/expect_error.h"
#include "quench/ops/linear/linear_fp8_cublaslt.h"

namespace quench {
namespace {

TEST(LinearFp8GroupScales, RepeatsEachChannelScalePerGroupGroupMajor) {
  const std::vector<float> channel = {0.5f, 2.0f, 0.125f};
  const std::vector<float> by_group = channel_scales_by_group(channel, 512);
  ASSERT_EQ(by_group.size(), channel.size() * 4);
  for (size_t g = 0; g < 4; ++g)
    for (size_t n = 0; n < channel.size(); ++n)
      EXPECT_EQ(by_group[g * channel.size() + n], channel[n]) << "group " << g << ", row " << n;
}

TEST(LinearFp8GroupScales, RefusesInputsThatAreNotWholeGroups) {
  const std::vector<float> channel = {1.0f};
  EXPECT_QUENCH_ERROR(channel_scales_by_group(channel, 200), {"200 inputs", "multiple of 128"});
  EXPECT_QUENCH_ERROR(channel_scales_by_group(channel, 0), {"0 inputs", "multiple of 128"});
}

TEST(LinearFp8GroupScales, BlockScaledKernelsTakeWholeGemmInputs) {
  const char* forced = std::getenv("QUENCH_FP8_CHANNEL_GEMM");
  if (forced != nullptr && *forced != '\0' && std::string(forced) != "auto") {
    GTEST_SKIP() << "QUENCH_FP8_CHANNEL_GEMM=" << forced << " is set";
  }
  const float scales[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  LinearWeight w;
  w.dtype = DType::kFP8E4M3;
  w.data = scales;  // never read
  w.scales = scales;
  w.scaling = WeightScaling::kChannel;
  EXPECT_FALSE(fp8_gemm_blockwise(w, 8, 2048, 3072));  // no group scales: outer vectors
  EXPECT_EQ(fp8_activation_group(w, 8, 2048, 3072), 2048);
  w.group_scales = scales;
  EXPECT_TRUE(fp8_gemm_blockwise(w, 8, 2048, 3072));
  EXPECT_EQ(fp8_activation_group(w, 8, 2048, 3072), 128);
  // Wider than deep (qkv, gate_up): to 128 tokens; no wider (o, down): to 256.
  EXPECT_EQ(channel_groups_max_tokens(2048, 3072), 128);
  EXPECT_EQ(channel_groups_max_tokens(2048, 2048), 256);
  EXPECT_EQ(channel_groups_max_tokens(8192, 2048), 256);
  EXPECT_TRUE(fp8_gemm_blockwise(w, 128, 2048, 3072));
  EXPECT_FALSE(fp8_gemm_blockwise(w, 129, 2048, 3072));  // prefill sizes: outer vectors
  EXPECT_EQ(fp8_activation_group(w, 129, 2048, 3072), 2048);
  EXPECT_TRUE(fp8_gemm_blockwise(w, 256, 8192, 2048));
  EXPECT_FALSE(fp8_gemm_blockwise(w, 257, 8192, 2048));
  EXPECT_FALSE(fp8_gemm_blockwise(w, 8, 384, 384));  // not a multiple of 512
  EXPECT_EQ(fp8_activation_group(w, 8, 384, 384), 384);
  LinearWeight blocks = w;
  blocks.group_scales = nullptr;
  blocks.scaling = WeightScaling::kBlock;
  blocks.block_out = blocks.block_in = 128;
  EXPECT_TRUE(fp8_gemm_blockwise(blocks, 8, 1024, 1024));
  EXPECT_TRUE(fp8_gemm_blockwise(blocks, 4096, 1024, 4096));  // blocks have no other kernel
  EXPECT_FALSE(fp8_gemm_blockwise(blocks, 8, 640, 640));
}

}  // namespace
}  // namespace quench
