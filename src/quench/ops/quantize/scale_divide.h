// Division by a quantization scale (SPEC §1.2: stored = fp8(x / scale)) without a divide
// instruction in the inner loop, and with the same result as the IEEE quotient x / scale.
//
// Given inv_scale = RN(1 / scale), Markstein's correction q1 = RN(q0 + RN(x - q0 * scale) *
// inv_scale) turns the approximate quotient q0 = RN(x * inv_scale) into the correctly rounded
// x / scale whenever the quotient is a normal float (the residual x - q0 * scale is then exact
// in one fma). Quotients below 2^-126 may differ by one float ulp, far under half the smallest
// FP8 subnormal, so the FP8 code is still the same; infinities and NaN take the plain division.
// tests/ops/quantize/scale_divide_test.cc checks it against x / scale.
#pragma once

#include <cmath>

#include "quench/core/host_device.h"

namespace quench {

QUENCH_HD float divide_by_scale(float x, float scale, float inv_scale) {
  const float q0 = x * inv_scale;
  const float residual = fmaf(-q0, scale, x);
  const float q1 = fmaf(residual, inv_scale, q0);
  return isfinite(q1) ? q1 : x / scale;
}

}  // namespace quench
