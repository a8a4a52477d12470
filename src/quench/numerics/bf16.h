// bf16 and f16 storage types and their conversions from/to float, usable on host and device.
// Conversions round to nearest even and agree bit for bit with CUDA's __float2bfloat16_rn and
// __float2half_rn (tests/gpu/numerics_exhaustive_gpu_test.cu checks all 2^32 inputs):
// NaN becomes the canonical 0x7fff, overflow becomes infinity. On the device the hardware
// conversion is used; the host code is the portable twin that the exhaustive test holds to it.
#pragma once

#include <cstdint>

#include "quench/numerics/float_bits.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace quench {

// Raw 16-bit storage; layout-compatible with __nv_bfloat16 / __half.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

QUENCH_HD uint16_t float_to_bf16_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
  const uint32_t u = float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  // bf16 is fp32's upper half, so round to nearest even is one add: below the halfway point the
  // carry does not reach bit 16, above it does, and at it the kept LSB decides. Overflow carries
  // into the exponent and gives infinity, as it should. The same codes as encode_rne(abs_bits, 7,
  // 127, 0x7f80) with the sign, for every non-NaN input (checked over all 2^32; the tests compare
  // with CUDA's conversions); without its data-dependent branches, which mispredict on random
  // values (the CPU backend rounds every activation to bf16).
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}

QUENCH_HD float bf16_bits_to_float(uint16_t b) {
  return bits_to_float(static_cast<uint32_t>(b) << 16);
}

QUENCH_HD uint16_t float_to_f16_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(x));
#else
  const uint32_t u = float_to_bits(x);
  const uint32_t abs_bits = u & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return 0x7fffu;
  const uint32_t sign = (u >> 16) & 0x8000u;
  return static_cast<uint16_t>(sign | encode_rne(abs_bits, 10, 15, 0x7c00u));
#endif
}

QUENCH_HD float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Subnormal: mantissa * 2^-24, exact in float.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
  return sign ? -magnitude : magnitude;
}

QUENCH_HD bf16 to_bf16(float x) {
  return bf16{float_to_bf16_bits(x)};
}
QUENCH_HD float to_float(bf16 x) {
  return bf16_bits_to_float(x.bits);
}
QUENCH_HD f16 to_f16(float x) {
  return f16{float_to_f16_bits(x)};
}
QUENCH_HD float to_float(f16 x) {
  return f16_bits_to_float(x.bits);
}

}  // namespace quench
