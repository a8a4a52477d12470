// FP8 e4m3fn and e5m2 conversions, usable on host and device.
//
// float -> fp8 rounds to nearest even and saturates finite overflow and infinities to +-max
// (448 for e4m3, 57344 for e5m2), exactly like __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...).
// NaN of either sign becomes 0x7f. On the device the hardware instruction is used; the host
// code agrees with it bit for bit on all 2^32 inputs (tests/gpu/numerics_exhaustive_gpu_test.cu).
// fp8 -> float is exact; NaN codes decode to the canonical float NaN 0x7fffffff (e4m3 on the
// device: CUDA's own conversion, whose every code the same test compares with the host's).
//
// Scale convention (SPEC §1.2): stored = fp8(x / scale), value = float(stored) * scale.
#pragma once

#include <cstdint>

#include "quench/core/dtype.h"
#include "quench/numerics/float_bits.h"

#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

namespace quench {

inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

enum class Fp8Format : uint8_t { kE4M3, kE5M2 };

QUENCH_HD float fp8_max(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? kFp8E4M3Max : kFp8E5M2Max;
}

QUENCH_HD uint8_t float_to_fp8_e4m3(float x) {
#if defined(__CUDA_ARCH__)
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
#else
  const uint32_t u = float_to_bits(x);
  const uint32_t abs_bits = u & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return 0x7f;
  const uint32_t sign = (u >> 24) & 0x80u;
  return static_cast<uint8_t>(sign | encode_rne(abs_bits, 3, 7, 0x7eu));
#endif
}

QUENCH_HD uint8_t float_to_fp8_e5m2(float x) {
#if defined(__CUDA_ARCH__)
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
#else
  const uint32_t u = float_to_bits(x);
  const uint32_t abs_bits = u & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return 0x7f;
  const uint32_t sign = (u >> 24) & 0x80u;
  return static_cast<uint8_t>(sign | encode_rne(abs_bits, 2, 15, 0x7bu));
#endif
}

QUENCH_HD float fp8_e4m3_to_float(uint8_t v) {
#if defined(__CUDA_ARCH__)
  // The hardware conversion (fp8 -> half is exact, half -> float too): two instructions where
  // the bit decode below is ~20 with branches, which the decode merge's NVFP4 epilogue fetches
  // cold on every launch (bench/LOG.md).
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3)));
#else
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exponent = (v >> 3) & 0xfu;
  const uint32_t mantissa = v & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) return bits_to_float(0x7fffffffu);  // NaN
  if (exponent != 0) return bits_to_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
  const float magnitude = static_cast<float>(mantissa) * 0.001953125f;  // 2^-9
  return sign ? -magnitude : magnitude;
#endif
}

QUENCH_HD float fp8_e5m2_to_float(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exponent = (v >> 2) & 0x1fu;
  const uint32_t mantissa = v & 0x3u;
  if (exponent == 0x1fu) {
    // Canonical NaN regardless of sign and payload, as CUDA's fp8 -> half -> float path gives.
    return mantissa ? bits_to_float(0x7fffffffu) : bits_to_float(sign | 0x7f800000u);
  }
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 21));
  const float magnitude = static_cast<float>(mantissa) * 1.52587890625e-05f;  // 2^-16
  return sign ? -magnitude : magnitude;
}

QUENCH_HD uint8_t float_to_fp8(float x, Fp8Format format) {
  return format == Fp8Format::kE4M3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x);
}

QUENCH_HD float fp8_to_float(uint8_t v, Fp8Format format) {
  return format == Fp8Format::kE4M3 ? fp8_e4m3_to_float(v) : fp8_e5m2_to_float(v);
}

// x (finite, |x| <= 448) rounded to its leading e4m3 value: 3 mantissa bits, ties away from
// zero, at x's own exponent. For |x| >= 2^-6 (e4m3's smallest normal) the result is on the e4m3
// grid, so float_to_fp8_e4m3 stores it exactly, and x - result is exact in float with
// |x - result| <= 2^-4 |x|: the split x = hi + lo of a two-term e4m3 value (the Hopper prefill's
// FP8 P·V on each row's last two tiles), where hi + e4m3(lo) is within 2^-8 |x| for |x| >= 2^-2
// and 2^-9 absolute below. Bit operations only (two integer instructions on the device).
QUENCH_HD float fp8_e4m3_leading_value(float x) {
  return bits_to_float((float_to_bits(x) + 0x80000u) & 0xFFF00000u);
}

// Maps an FP8 DType to its format; throws for other dtypes (host only).
Fp8Format fp8_format_of(DType dtype);

}  // namespace quench
