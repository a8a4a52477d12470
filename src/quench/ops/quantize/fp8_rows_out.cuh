// The device side of Fp8RowsOut (fp8_rows_out.h): one activation row's e4m3 codes and scales,
// written by the kernel that computed the row, with the arithmetic of quantize_fp8_dynamic.cu
// (which uses the same functions), so that both write the same bits.
#pragma once

#include <cstdint>

#include "quench/core/block_reduce.cuh"
#include "quench/ops/quantize/fp8_rows_out.h"
#include "quench/ops/quantize/vec8_convert.cuh"

namespace quench::fp8_rows_device {

inline constexpr float kE4m3Max = 448.0f;

__device__ __forceinline__ float amax8(const float (&v)[8]) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    m = fmaxf(m, fabsf(v[i]));
  return m;
}

// amax / 448, 1 for an all-zero group (fp8_scale_from_amax).
__device__ __forceinline__ float scale_from_amax(float amax) {
  return amax == 0.0f ? 1.0f : amax / kE4m3Max;
}

// Group g's scale of row `row` in a layout of `padded_rows` rows and `groups` groups per row.
__device__ __forceinline__ float& scale_at(float* scales, bool by_group, int32_t padded_rows,
                                           int32_t groups, int64_t row, int32_t g) {
  return scales[by_group ? int64_t{g} * padded_rows + row : row * groups + g];
}

// One vector of a per-128-column pass over row `row`: this thread's vector v (active: it has one;
// the 16 vectors of a group lie in one half warp, all active or none) as floats. The group's amax
// is a half-warp shuffle reduction, so every lane of the warp must call it.
__device__ __forceinline__ void store_group_vector(const Fp8RowsOut& o, int32_t padded_rows,
                                                   int64_t row, int32_t width, int v, bool active,
                                                   const float (&f)[8]) {
  float amax = amax8(f);
#pragma unroll
  for (int offset = 8; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (!active) return;
  const float scale = scale_from_amax(amax);
  reinterpret_cast<uint2*>(o.data + row * width)[v] =
      pack_fp8x8(f, scale, 1.0f / scale, Fp8Format::kE4M3);
  if (v % 16 == 0) {
    scale_at(o.scales, o.layout.scales_by_group, padded_rows, width / 128, row, v / 16) = scale;
  }
}

// One quad (4 consecutive values from column col0, a multiple of 4) of a per-128-column pass over
// row `row`: the 32 quads of a group lie in one warp, lane i holding quad i (all active or none).
// The group's amax is a whole-warp shuffle reduction, so every lane must call it. The same codes
// and scale as store_group_vector over the group's values.
__device__ __forceinline__ void store_group_quad(const Fp8RowsOut& o, int32_t padded_rows,
                                                 int64_t row, int32_t width, int32_t col0,
                                                 bool active, const float (&f)[4]) {
  float amax = 0.0f;  // as amax8: a group of NaNs gets scale 1, not NaN
#pragma unroll
  for (int i = 0; i < 4; ++i)
    amax = fmaxf(amax, fabsf(f[i]));
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (!active) return;
  const float scale = scale_from_amax(amax);
  *reinterpret_cast<uint32_t*>(o.data + row * width + col0) =
      pack_fp8x4(f, scale, 1.0f / scale, Fp8Format::kE4M3);
  if (col0 % 128 == 0) {
    scale_at(o.scales, o.layout.scales_by_group, padded_rows, width / 128, row, col0 / 128) = scale;
  }
}

// Row `row` past the producer's rows: zeros, scale 1 (the padding an FP8 GEMM reads).
template <int kThreads>
__device__ __forceinline__ void store_padding_row(const Fp8RowsOut& o, int32_t padded_rows,
                                                  int64_t row, int32_t width) {
  auto* dst = reinterpret_cast<uint2*>(o.data + row * width);
  const int32_t groups = width / o.group;
  for (int v = static_cast<int>(threadIdx.x); v < width / 8; v += kThreads)
    dst[v] = make_uint2(0u, 0u);
  for (int g = static_cast<int>(threadIdx.x); g < groups; g += kThreads)
    scale_at(o.scales, o.layout.scales_by_group, padded_rows, groups, row, g) = 1.0f;
}

// Quantizes row `row` of `width` bf16 values that the CTA's threads hold as 16-byte vectors,
// thread t vector v = t + k * kThreads in values[k] (those with v < width / 8): per row (group ==
// width; a CTA reduction, so every thread must call it) or per 128 columns (16 consecutive
// vectors: a half warp's, reduced by shuffles).
template <int kThreads, int kMaxVectors>
__device__ __forceinline__ void store_row(const Fp8RowsOut& o, int32_t padded_rows, int64_t row,
                                          int32_t width, const uint4 (&values)[kMaxVectors]) {
  static_assert(kThreads % 32 == 0, "whole warps: the group reduction shuffles over half warps");
  const int vectors = width / 8;
  const int tid = static_cast<int>(threadIdx.x);
  auto* dst = reinterpret_cast<uint2*>(o.data + row * width);
  const bool by_group = o.layout.scales_by_group;
  if (o.group == width) {
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxVectors; ++k) {
      if (tid + k * kThreads >= vectors) break;
      float f[8];
      unpack_bf16x8(values[k], f);
      amax = fmaxf(amax, amax8(f));
    }
    const float scale = scale_from_amax(cta::block_max<kThreads>(amax));
    const float inv_scale = 1.0f / scale;
#pragma unroll
    for (int k = 0; k < kMaxVectors; ++k) {
      const int v = tid + k * kThreads;
      if (v >= vectors) break;
      float f[8];
      unpack_bf16x8(values[k], f);
      dst[v] = pack_fp8x8(f, scale, inv_scale, Fp8Format::kE4M3);
    }
    if (tid == 0) scale_at(o.scales, by_group, padded_rows, 1, row, 0) = scale;
    return;
  }
#pragma unroll
  for (int k = 0; k < kMaxVectors; ++k) {
    const int v = tid + k * kThreads;
    if (k * kThreads >= vectors) break;  // uniform: no lane of this pass has a vector
    float f[8] = {};
    if (v < vectors) unpack_bf16x8(values[k], f);
    store_group_vector(o, padded_rows, row, width, v, v < vectors, f);
  }
}

}  // namespace quench::fp8_rows_device
