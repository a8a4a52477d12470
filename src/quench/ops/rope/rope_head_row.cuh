// One head row of head_dim bf16 elements held by a group of head_dim/8 lanes of a warp, eight
// consecutive elements per lane ("lane group"). Optional per-head RMSNorm, then RoPE, in
// registers; neox partners (i, i + rotary_dim/2) are exchanged with warp shuffles, so the GPU
// kernels need rotary_dim % 16 == 0 (a lane's eight elements then share their partner lane).
#pragma once

#include <cstdint>

#include "quench/numerics/bf16.h"
#include "quench/ops/quantize/scale_divide.h"
#include "quench/ops/quantize/vec8_convert.cuh"
#include "quench/ops/rope/rope_angles_device.cuh"
#include "quench/ops/rope/rope_config.h"

namespace quench {

struct LaneGroup {
  int32_t lane;   // 0 .. lanes-1: owns elements [8*lane, 8*lane + 8)
  int32_t lanes;  // head_dim / 8: 8, 16 or 32, aligned inside the warp
  uint32_t mask;  // the group's lanes, for the *_sync intrinsics
};

__device__ __forceinline__ LaneGroup make_lane_group(int32_t head_dim) {
  LaneGroup g;
  g.lanes = head_dim / 8;
  const int32_t warp_lane = static_cast<int32_t>(threadIdx.x) & 31;
  g.lane = warp_lane & (g.lanes - 1);
  g.mask = g.lanes == 32 ? 0xffffffffu : ((1u << g.lanes) - 1u) << (warp_lane - g.lane);
  return g;
}

// y = x / sqrt(mean(x^2) + eps) * weight over the whole head row (all lanes of g call it).
__device__ __forceinline__ void rms_norm_x8(float x[8], const LaneGroup& g, int32_t head_dim,
                                            const uint16_t* weight, float eps) {
  float sum_sq = 0.0f;
#pragma unroll
  for (int32_t j = 0; j < 8; ++j)
    sum_sq = fmaf(x[j], x[j], sum_sq);
  for (int32_t offset = g.lanes / 2; offset > 0; offset /= 2) {
    sum_sq += __shfl_xor_sync(g.mask, sum_sq, offset, g.lanes);
  }
  const float norm = sqrtf(sum_sq / static_cast<float>(head_dim) + eps);
  const float inv_norm = 1.0f / norm;
  float w[8];
  unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(weight) + g.lane), w);
#pragma unroll
  for (int32_t j = 0; j < 8; ++j)
    x[j] = divide_by_scale(x[j], norm, inv_norm) * w[j];
}

// Rotates the row in place at position pos (all lanes of g call it; lanes past rotary_dim keep
// their values). Bit-exact with the reference's rope_rotate_pair given the same cos/sin.
template <bool kFromCache>
__device__ __forceinline__ void rope_x8(float x[8], const LaneGroup& g, const RopeAngles& angles,
                                        const float* smem_inv_freq, int32_t pos) {
  const int32_t first_elem = 8 * g.lane;
  const bool rotated = first_elem < angles.rotary_dim;
  if (angles.style == RopeStyle::kGptj) {
    if (!rotated) return;
    float c[4], s[4];
    rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_elem / 2, c, s);
#pragma unroll
    for (int32_t m = 0; m < 4; ++m) {
      rope_rotate_pair(x[2 * m], x[2 * m + 1], c[m], s[m], &x[2 * m], &x[2 * m + 1]);
    }
    return;
  }
  // neox: lanes [0, half_lanes) hold x1 of pairs, lanes [half_lanes, 2*half_lanes) hold x2.
  const int32_t half_lanes = angles.rotary_dim / 16;
  const bool first_half = g.lane < half_lanes;
  const int32_t partner =
      !rotated ? g.lane : (first_half ? g.lane + half_lanes : g.lane - half_lanes);
  float other[8];
#pragma unroll
  for (int32_t j = 0; j < 8; ++j)
    other[j] = __shfl_sync(g.mask, x[j], partner, g.lanes);
  if (!rotated) return;
  const int32_t first_pair = first_half ? first_elem : first_elem - angles.rotary_dim / 2;
  float c[8], s[8];
  rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_pair, c, s);
  rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_pair + 4, c + 4, s + 4);
#pragma unroll
  for (int32_t j = 0; j < 8; ++j) {
    // x1' = x1*c - x2*s for the first half; x2' = x2*c + x1*s = x2*c - (-x1)*s for the second,
    // so both are the first output of rope_rotate_pair (negation is exact).
    float rotated_first, unused;
    rope_rotate_pair(x[j], first_half ? other[j] : -other[j], c[j], s[j], &rotated_first, &unused);
    x[j] = rotated_first;
  }
}

}  // namespace quench
