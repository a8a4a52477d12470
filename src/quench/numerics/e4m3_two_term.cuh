// A float as the sum of two e4m3 values, for FP8 tensor-core products of 16-bit data: hi =
// e4m3(y) and lo = e4m3(y - hi), both rounded to nearest even with saturation. For y a bf16 value
// (8 significant bits) scaled by a power of two into |y| < 256, hi + lo == y exactly where
// |y| >= 2^-2, and |hi + lo - y| <= 2^-10 below (tests/numerics/e4m3_two_term_test.cc checks both
// on every bf16 value). Used where a bf16 query meets an FP8 cache on FP8 wgmma: the Hopper
// prefill's Q fragments and the decode kernel's Q·Kᵀ variant.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace quench {

struct E4m3x2Terms {
  uint16_t hi;  // e4m3 codes of (y0, y1), y0 in the low byte
  uint16_t lo;
};

// y = x * scale, the input of e4m3x2_two_term, for scale a power of two (exact). An infinite x
// becomes NaN: e4m3 has no infinity and its satfinite conversion would make it 448, so a broken
// upstream value stays its own row's problem (NaN stays NaN).
__device__ __forceinline__ float e4m3_two_term_input(float x, float scale) {
  return isinf(x) ? __int_as_float(0x7fc00000) : x * scale;
}

__device__ __forceinline__ E4m3x2Terms e4m3x2_two_term(float y0, float y1) {
  const __nv_fp8x2_storage_t hi =
      __nv_cvt_float2_to_fp8x2(make_float2(y0, y1), __NV_SATFINITE, __NV_E4M3);
  const float2 hi_value = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(hi, __NV_E4M3)));
  // y - hi is exact in fp32 (hi is y rounded to 4 significant bits).
  const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
      make_float2(y0 - hi_value.x, y1 - hi_value.y), __NV_SATFINITE, __NV_E4M3);
  return {static_cast<uint16_t>(hi), static_cast<uint16_t>(lo)};
}

}  // namespace quench
