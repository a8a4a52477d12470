// SwiGLU: silu of the gate times up, not the other way round, at known values.
#include "quench/ops/swiglu/swiglu_reference.h"

#include <gtest/gtest.h>

#include <vector>

#include "harness/expect_error.h"

namespace quench {
namespace {

TEST(SwigluReference, SiluOfGateTimesUp) {
  const std::vector<float> gate = {0.0f, 1.0f, -2.0f, 3.0f};
  const std::vector<float> up = {5.0f, 2.0f, 0.5f, -1.0f};
  std::vector<float> out(4);
  swiglu_reference(2, 2, gate.data(), up.data(), out.data());
  // silu(1) = 0.7310586, silu(-2) = -0.2384058, silu(3) = 2.8577223.
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f * 0.7310586f);
  EXPECT_FLOAT_EQ(out[2], 0.5f * -0.23840584f);
  EXPECT_FLOAT_EQ(out[3], -2.8577223f);
  // In place over the gate, as the model runs it.
  std::vector<float> in_place = gate;
  swiglu_reference(1, 4, in_place.data(), up.data(), in_place.data());
  EXPECT_EQ(in_place, out);
}

TEST(SwigluReference, BadShapeIsAnError) {
  float v = 0.0f;
  EXPECT_QUENCH_ERROR(swiglu_reference(1, 0, &v, &v, &v), {"features >= 1"});
}

}  // namespace
}  // namespace quench
