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

// y = x / sqrt(mean(x^2) + eps) * weight over the whole head row (all lanes of g call it);
// weight_bits: the lane's 8 bf16 weights [8*lane, 8*lane + 8), loaded by the caller so the load
// can be issued early and shared by several rows.
__device__ __forceinline__ void rms_norm_x8(float x[8], const LaneGroup& g, int32_t head_dim,
                                            const uint4& weight_bits, float eps) {
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
  unpack_bf16x8(weight_bits, w);
#pragma unroll
  for (int32_t j = 0; j < 8; ++j)
    x[j] = divide_by_scale(x[j], norm, inv_norm) * w[j];
}

// As above with the weights read from `weight` (bf16 [head_dim]).
__device__ __forceinline__ void rms_norm_x8(float x[8], const LaneGroup& g, int32_t head_dim,
                                            const uint16_t* weight, float eps) {
  rms_norm_x8(x, g, head_dim, __ldg(reinterpret_cast<const uint4*>(weight) + g.lane), eps);
}

// The cos/sin one lane needs at one position: they depend on the position and the lane only, so
// a kernel that holds several heads of one token loads them once for all of them. gptj uses the
// first 4 pairs, neox all 8; lanes past rotary_dim use none.
struct RopeLaneAngles {
  float c[8];
  float s[8];
};

// Fills `a` for lane g.lane at position pos (no shuffles: any subset of lanes may call it).
template <bool kFromCache>
__device__ __forceinline__ void load_rope_lane_angles(const LaneGroup& g, const RopeAngles& angles,
                                                      const float* smem_inv_freq, int32_t pos,
                                                      RopeLaneAngles& a) {
  const int32_t first_elem = 8 * g.lane;
  if (first_elem >= angles.rotary_dim) return;
  if (angles.style == RopeStyle::kGptj) {
    rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_elem / 2, a.c, a.s);
    return;
  }
  const int32_t half_lanes = angles.rotary_dim / 16;
  const int32_t first_pair = g.lane < half_lanes ? first_elem : first_elem - angles.rotary_dim / 2;
  rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_pair, a.c, a.s);
  rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_pair + 4, a.c + 4, a.s + 4);
}

// cos/sin of pairs [first_pair, first_pair + 4) from a cos/sin row (see below).
__device__ __forceinline__ void rope_cos_sin4_from_row(const float* row, int32_t rotary_dim,
                                                       int32_t first_pair, float c[4], float s[4]) {
  const float4 cv = *reinterpret_cast<const float4*>(row + first_pair);
  const float4 sv = *reinterpret_cast<const float4*>(row + rotary_dim / 2 + first_pair);
  c[0] = cv.x, c[1] = cv.y, c[2] = cv.z, c[3] = cv.w;
  s[0] = sv.x, s[1] = sv.y, s[2] = sv.z, s[3] = sv.w;
}

// As load_rope_lane_angles<true>, with the position's cos/sin row already at `row` (rotary_dim
// floats: cos of pair i at [i], sin at [rotary_dim/2 + i]; 16-byte aligned, in any state space,
// e.g. staged in shared memory): the same values, so the same rotation bits.
__device__ __forceinline__ void load_rope_lane_angles_from_row(const LaneGroup& g,
                                                               const RopeAngles& angles,
                                                               const float* row,
                                                               RopeLaneAngles& a) {
  const int32_t first_elem = 8 * g.lane;
  if (first_elem >= angles.rotary_dim) return;
  if (angles.style == RopeStyle::kGptj) {
    rope_cos_sin4_from_row(row, angles.rotary_dim, first_elem / 2, a.c, a.s);
    return;
  }
  const int32_t half_lanes = angles.rotary_dim / 16;
  const int32_t first_pair = g.lane < half_lanes ? first_elem : first_elem - angles.rotary_dim / 2;
  rope_cos_sin4_from_row(row, angles.rotary_dim, first_pair, a.c, a.s);
  rope_cos_sin4_from_row(row, angles.rotary_dim, first_pair + 4, a.c + 4, a.s + 4);
}

// Rotates the row in place with the lane's cos/sin from load_rope_lane_angles (all lanes of g
// call it; lanes past rotary_dim keep their values). Bit-exact with the reference's
// rope_rotate_pair given the same cos/sin.
__device__ __forceinline__ void rope_x8(float x[8], const LaneGroup& g, const RopeAngles& angles,
                                        const RopeLaneAngles& a) {
  const int32_t first_elem = 8 * g.lane;
  const bool rotated = first_elem < angles.rotary_dim;
  if (angles.style == RopeStyle::kGptj) {
    if (!rotated) return;
#pragma unroll
    for (int32_t m = 0; m < 4; ++m) {
      rope_rotate_pair(x[2 * m], x[2 * m + 1], a.c[m], a.s[m], &x[2 * m], &x[2 * m + 1]);
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
#pragma unroll
  for (int32_t j = 0; j < 8; ++j) {
    // x1' = x1*c - x2*s for the first half; x2' = x2*c + x1*s = x2*c - (-x1)*s for the second,
    // so both are the first output of rope_rotate_pair (negation is exact).
    float rotated_first, unused;
    rope_rotate_pair(x[j], first_half ? other[j] : -other[j], a.c[j], a.s[j], &rotated_first,
                     &unused);
    x[j] = rotated_first;
  }
}

// Rotates the row in place at position pos (load_rope_lane_angles + rope_x8 above).
template <bool kFromCache>
__device__ __forceinline__ void rope_x8(float x[8], const LaneGroup& g, const RopeAngles& angles,
                                        const float* smem_inv_freq, int32_t pos) {
  RopeLaneAngles a;
  load_rope_lane_angles<kFromCache>(g, angles, smem_inv_freq, pos, a);
  rope_x8(x, g, angles, a);
}

}  // namespace quench
