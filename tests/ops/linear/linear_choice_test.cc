// Which kernel linear_cuda gives a layer (linear_prefers_skinny): with QUENCH_LINEAR unset, the
// default must be "auto" (one-token layers stream their weights, wider ones go to cuBLAS). The
// switch once compared its unset value (then "") with "auto", so the default silently ran cuBLAS.
#include <gtest/gtest.h>

#include <cstdlib>

#include "quench/ops/linear/linear_cublas.h"
#include "quench/ops/linear/linear_fp8_weight.h"
#include "quench/ops/linear/linear_skinny.h"

namespace quench {
namespace {

TEST(LinearChoice, OneTokenLayersStreamTheWeightsByDefault) {
  const char* forced = std::getenv("QUENCH_LINEAR");
  if (forced != nullptr && *forced != '\0') GTEST_SKIP() << "QUENCH_LINEAR=" << forced << " is set";
  EXPECT_TRUE(linear_prefers_skinny(1));
  EXPECT_FALSE(linear_prefers_skinny(2));
  EXPECT_FALSE(linear_prefers_skinny(kSkinnyLinearMaxTokens));
  EXPECT_FALSE(linear_prefers_skinny(0));
  EXPECT_FALSE(linear_prefers_skinny(64));
}

// Which FP8-weight layers stream (linear_fp8_streams) rather than take the GEMM, on the Llama
// shapes the rule was measured on: every layer up to 2 tokens; at 3-4 tokens the 1B's qkv and o
// (4-6 Mi elements) only, not its down (16 Mi) or gate_up (out = 8 in), nor any 8B layer.
TEST(LinearChoice, Fp8WeightsStreamForTwoTokensAndSmallLayersUpToFour) {
  struct Layer {
    const char* name;
    int32_t in, out;
    bool streams_at_4;
  };
  const Layer layers[] = {
      {"1B qkv", 2048, 3072, true},       {"1B o", 2048, 2048, true},
      {"1B gate_up", 2048, 16384, false}, {"1B down", 8192, 2048, false},
      {"8B qkv", 4096, 6144, false},      {"8B o", 4096, 4096, false},
      {"8B down", 14336, 4096, false},
  };
  for (const Layer& l : layers) {
    SCOPED_TRACE(l.name);
    EXPECT_TRUE(linear_fp8_streams(1, l.in, l.out));
    EXPECT_TRUE(linear_fp8_streams(2, l.in, l.out));
    EXPECT_EQ(linear_fp8_streams(3, l.in, l.out), l.streams_at_4);
    EXPECT_EQ(linear_fp8_streams(4, l.in, l.out), l.streams_at_4);
    EXPECT_FALSE(linear_fp8_streams(5, l.in, l.out));
  }
  // The size bound is inclusive, and is the product (no 32-bit overflow at 128k x 128k).
  EXPECT_TRUE(linear_fp8_streams(4, 2048, 4096));
  EXPECT_FALSE(linear_fp8_streams(4, 2048, 4097));
  EXPECT_FALSE(linear_fp8_streams(4, 131072, 131071));
}

}  // namespace
}  // namespace quench
