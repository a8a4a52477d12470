// Division by a quantization scale (SPEC §1.2: stored = fp8(x / scale)) without a divide
// instruction in the inner loop, and with the same result as the IEEE quotient x / scale.
//
// Given inv_scale = RN(1 / scale), Markstein's correction q1 = RN(q0 + RN(x - q0 * scale) *
// inv_scale) turns the approximate quotient q0 = RN(x * inv_scale) into the correctly rounded
// x / scale whenever |x| and |x / scale| are at least 2^-100 (the residual x - q0 * scale is
// then exact in one fma). Below that the result may be one float ulp off; with scale >= 2^-20
// such quotients are far below half the smallest FP8 subnormal (2^-17), so the FP8 code is the
// same. Infinities and NaN take the plain division.
// tests/ops/quantize/scale_divide_test.cc checks it against x / scale.
#pragma once

#include <cmath>

#include "quench/core/host_device.h"
#include "quench/numerics/float_bits.h"

namespace quench {

// The correction alone: equal to x / scale in the range above; NaN where x is infinite or
// x * inv_scale overflows (the IEEE quotient is then infinite or saturates FP8 anyway). For
// kernels that detect the NaN once per vector instead of testing every element.
QUENCH_HD float divide_by_scale_unguarded(float x, float scale, float inv_scale) {
  const float q0 = x * inv_scale;
  const float residual = fmaf(-q0, scale, x);
  return fmaf(residual, inv_scale, q0);
}

QUENCH_HD float divide_by_scale(float x, float scale, float inv_scale) {
  const float q1 = divide_by_scale_unguarded(x, scale, inv_scale);
  const bool finite = (float_to_bits(q1) & 0x7f800000u) != 0x7f800000u;
  return finite ? q1 : x / scale;
}

}  // namespace quench
