// Eight consecutive elements as one 16-byte (bf16) or 8-byte (FP8) vector (and four as one FP8
// word): unpacking to float
// and the single rounding to the output type, through the numerics/ conversions so that GPU
// results equal the CPU reference's bit for bit.
#pragma once

#include <cstdint>

#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/ops/quantize/scale_divide.h"

namespace quench {

__device__ __forceinline__ void unpack_bf16x8(const uint4& raw, float x[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int32_t i = 0; i < 4; ++i) {
    x[2 * i] = bf16_bits_to_float(static_cast<uint16_t>(words[i] & 0xffffu));
    x[2 * i + 1] = bf16_bits_to_float(static_cast<uint16_t>(words[i] >> 16));
  }
}

__device__ __forceinline__ uint4 pack_bf16x8(const float y[8]) {
  uint32_t words[4];
#pragma unroll
  for (int32_t i = 0; i < 4; ++i) {
    words[i] = static_cast<uint32_t>(float_to_bf16_bits(y[2 * i])) |
               (static_cast<uint32_t>(float_to_bf16_bits(y[2 * i + 1])) << 16);
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// fp8(y / scale) for four values, little-endian bytes: pack_fp8x8's arithmetic (below) for a
// writer that holds a quad (the decode attention epilogue's FP8 rows).
__device__ __forceinline__ uint32_t pack_fp8x4(const float (&y)[4], float scale, float inv_scale,
                                               Fp8Format format) {
  const __nv_fp8_interpretation_t kind = format == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  uint32_t word = 0u;
#pragma unroll
  for (int32_t i = 0; i < 2; ++i) {
    const float2 pair = make_float2(divide_by_scale_unguarded(y[2 * i], scale, inv_scale),
                                    divide_by_scale_unguarded(y[2 * i + 1], scale, inv_scale));
    word |= static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, kind)) << (16 * i);
  }
  if (__vcmpeq4(word & 0x7f7f7f7fu, 0x7f7f7f7fu) != 0u) {  // a NaN quotient: see pack_fp8x8
    word = 0u;
#pragma unroll
    for (int32_t i = 0; i < 4; ++i)
      word |= static_cast<uint32_t>(float_to_fp8(y[i] / scale, format)) << (8 * i);
  }
  return word;
}

// fp8(y / scale) for eight values (scale divides; inv_scale = 1 / scale), little-endian bytes.
// Two values per conversion instruction: __nv_cvt_float2_to_fp8x2 is the instruction that
// float_to_fp8_e4m3/e5m2 use, so the codes are the same. A NaN quotient is the only way to get
// a code 0x7f or 0xff (NaN in both formats; finite values saturate below); it flags an infinite x
// or an overflowing quotient, where the unguarded division is NaN but the IEEE quotient is not, or
// a NaN input: such vectors are redone with the plain division.
__device__ __forceinline__ uint2 pack_fp8x8(const float y[8], float scale, float inv_scale,
                                            Fp8Format format) {
  const __nv_fp8_interpretation_t kind = format == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  uint32_t words[2] = {0u, 0u};
#pragma unroll
  for (int32_t i = 0; i < 4; ++i) {
    const float2 pair = make_float2(divide_by_scale_unguarded(y[2 * i], scale, inv_scale),
                                    divide_by_scale_unguarded(y[2 * i + 1], scale, inv_scale));
    words[i / 2] |= static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, kind))
                    << (16 * (i % 2));
  }
  const uint32_t magnitudes[2] = {words[0] & 0x7f7f7f7fu, words[1] & 0x7f7f7f7fu};
  if ((__vcmpeq4(magnitudes[0], 0x7f7f7f7fu) | __vcmpeq4(magnitudes[1], 0x7f7f7f7fu)) != 0u) {
    words[0] = words[1] = 0u;
#pragma unroll
    for (int32_t i = 0; i < 8; ++i) {
      words[i / 4] |= static_cast<uint32_t>(float_to_fp8(y[i] / scale, format)) << (8 * (i % 4));
    }
  }
  return make_uint2(words[0], words[1]);
}

// fp8(y * multiplier) for eight values, little-endian bytes: for callers that fold a per-row
// factor into the inverse scale (the fused RoPE kernel's RMSNorm path), where the product
// replaces the quotient and the result may differ from fp8(y / scale) by the rounding of one
// multiply. Saturates like pack_fp8x8; a NaN input stays NaN.
__device__ __forceinline__ uint2 pack_fp8x8_multiplied(const float y[8], float multiplier,
                                                       Fp8Format format) {
  const __nv_fp8_interpretation_t kind = format == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  uint32_t words[2] = {0u, 0u};
#pragma unroll
  for (int32_t i = 0; i < 4; ++i) {
    const float2 pair = make_float2(y[2 * i] * multiplier, y[2 * i + 1] * multiplier);
    words[i / 2] |= static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, kind))
                    << (16 * (i % 2));
  }
  return make_uint2(words[0], words[1]);
}

// Stores eight values at dst as bf16 (dtype kBF16, scale ignored: it is 1 by contract) or as
// fp8(y / scale).
__device__ __forceinline__ void store_x8(void* dst, DType dtype, const float y[8], float scale,
                                         float inv_scale) {
  if (dtype == DType::kBF16) {
    *reinterpret_cast<uint4*>(dst) = pack_bf16x8(y);
  } else {
    *reinterpret_cast<uint2*>(dst) = pack_fp8x8(
        y, scale, inv_scale, dtype == DType::kFP8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2);
  }
}

}  // namespace quench
