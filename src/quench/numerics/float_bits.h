// Bit-level helpers shared by the number formats: float <-> bits, and one round-to-nearest-even
// encoder for every narrow IEEE-like format quench uses (bf16, f16, fp8 e4m3/e5m2, e2m1).
#pragma once

#include <cstdint>
#include <cstring>

#include "quench/core/host_device.h"

namespace quench {

QUENCH_HD uint32_t float_to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

QUENCH_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// Encodes a non-negative, non-NaN float (given as bits) into a narrow format with `mant_bits`
// mantissa bits and exponent bias `bias`, rounding to nearest even. Results above `max_code`
// (which includes +inf input) become `max_code`: the largest finite code for saturating
// formats, the infinity code for IEEE formats. Subnormals of both the input and the target are
// exact: the value M * 2^(e-150) is divided by the target's quantum at its exponent and rounded.
QUENCH_HD uint32_t encode_rne(uint32_t abs_bits, int mant_bits, int bias, uint32_t max_code) {
  if (abs_bits >= 0x7f800000u) return max_code;
  int e = static_cast<int>(abs_bits >> 23);
  uint32_t significand = abs_bits & 0x7fffffu;
  if (e == 0) {
    e = 1;  // float subnormal: same quantum as the smallest normal, no implicit bit
  } else {
    significand |= 0x800000u;
  }
  const int min_exponent = 1 - bias;
  const int exponent = (e - 127 > min_exponent) ? e - 127 : min_exponent;
  // value / quantum(exponent) = significand * 2^(e - 150 - exponent + mant_bits)
  const int shift = 150 + exponent - mant_bits - e;
  uint32_t n;
  if (shift > 24) {
    n = 0;  // below half the smallest step: significand < 2^24 <= 2^(shift-1)
  } else if (shift == 0) {
    n = significand;
  } else {
    n = significand >> shift;
    const uint32_t rem = significand & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (n & 1u))) ++n;
  }
  // For normals n carries the implicit bit, so this lands on (exponent + bias) << mant_bits.
  const uint32_t code = (static_cast<uint32_t>(exponent + bias - 1) << mant_bits) + n;
  return code > max_code ? max_code : code;
}

}  // namespace quench
