// Which kernel linear_cuda gives a layer (linear_prefers_skinny): with QUENCH_LINEAR unset, the
// default must be "auto" (one-token layers stream their weights, wider ones go to cuBLAS). The
// switch once compared its unset value (then "") with "auto", so the default silently ran cuBLAS.
#include <gtest/gtest.h>

#include <cstdlib>

#include "quench/ops/linear/linear_cublas.h"
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

}  // namespace
}  // namespace quench
