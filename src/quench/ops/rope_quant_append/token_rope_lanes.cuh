// The RoPE state of one lane for one token, computed once per warp and reused for every head row
// of that token: a head row of kHeadDim bf16 elements is held by a group of kHeadDim/8 lanes,
// eight consecutive elements per lane, so a lane always owns the same eight dims and therefore the
// same cos/sin values, whatever the head. Bit-exact with rope_rotate_pair (rope_config.h) given
// the same cos/sin; neox partners (i, i + rotary_dim/2) come from a shuffle, which needs
// rotary_dim % 16 == 0 (a lane's eight elements then share one partner lane).
#pragma once

#include <cstdint>

#include "quench/numerics/bf16.h"
#include "quench/ops/rope/rope_angles_device.cuh"
#include "quench/ops/rope/rope_config.h"

namespace quench {

// Where a lane sits: its group of kHeadDim/8 lanes (one head row) inside the warp.
template <int32_t kHeadDim>
struct RowLane {
  static constexpr int32_t kLanes = kHeadDim / 8;  // lanes per head row: 8, 16 or 32
  static constexpr int32_t kGroups = 32 / kLanes;  // head rows a warp holds at once
  int32_t lane;                                    // 0 .. kLanes-1: elements [8*lane, +8)
  int32_t group;                                   // 0 .. kGroups-1
  uint32_t mask;                                   // the group's lanes, for *_sync calls
};

template <int32_t kHeadDim>
__device__ __forceinline__ RowLane<kHeadDim> make_row_lane() {
  using L = RowLane<kHeadDim>;
  RowLane<kHeadDim> r;
  const int32_t warp_lane = static_cast<int32_t>(threadIdx.x) & 31;
  r.lane = warp_lane % L::kLanes;
  r.group = warp_lane / L::kLanes;
  r.mask = L::kLanes == 32 ? 0xffffffffu : ((1u << L::kLanes) - 1u) << (r.group * L::kLanes);
  return r;
}

// Per-thread float4 slots in shared memory, column threadIdx.x of a [slots][kThreads] array:
// values a lane computes once per token and reads for every row (cos/sin, norm weights). Only
// the owning thread touches its column, so no barrier is needed; registers stay free for the
// row loads in flight. Accessed through the shared window explicitly: a generic pointer that the
// compiler cannot trace back to the array (it happened in the ring schedule's row loop) turns
// every read into a generic 16-byte load.
template <int32_t kThreads>
struct LaneSlots {
  uint32_t column;  // shared-window address of array[0][threadIdx.x]

  static __device__ __forceinline__ LaneSlots at(float4* array_column) {
    return {static_cast<uint32_t>(__cvta_generic_to_shared(array_column))};
  }

  __device__ __forceinline__ float4 load(int32_t slot) const {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(address(slot)));
    return v;
  }

  __device__ __forceinline__ void store(int32_t slot, const float4& v) const {
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};"
                 :
                 : "r"(address(slot)), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
  }

 private:
  __device__ __forceinline__ uint32_t address(int32_t slot) const {
    return column + static_cast<uint32_t>(slot * kThreads * 16);
  }
};

__device__ __forceinline__ void float4_to_array(const float4& v, float out[4]) {
  out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
}

// kNeox: eight pairs per lane (the lane's elements are all x1 or all x2 of their pairs); gptj:
// four pairs per lane (adjacent elements). cos in slots [0, kQuads), sin in [kQuads, 2 kQuads).
template <int32_t kHeadDim, bool kNeox, int32_t kThreads>
struct TokenRopeLanes {
  static constexpr int32_t kPairs = kNeox ? 8 : 4;
  static constexpr int32_t kQuads = kPairs / 4;
  static constexpr int32_t kSlots = 2 * kQuads;
  // neox second-half lanes store -sin: x2' = x2*c + x1*s = fmaf(x2, c, -(x1 * -s)), and negation
  // is exact, so every lane evaluates the first output of rope_rotate_pair.
  LaneSlots<kThreads> cos_sin;
  int32_t partner;  // neox: warp lane holding this lane's partner elements
  bool rotated;     // false past rotary_dim: the elements pass through

  // Rotates the row held by x in place; every lane of the group calls it (shuffles inside).
  __device__ __forceinline__ void rotate(float x[8], uint32_t mask) const {
    float other[8];
    if constexpr (kNeox) {
#pragma unroll
      for (int32_t j = 0; j < 8; ++j)
        other[j] = __shfl_sync(mask, x[j], partner);
    }
    if (!rotated) return;
    float c[kPairs], s[kPairs];
#pragma unroll
    for (int32_t q = 0; q < kQuads; ++q) {
      float4_to_array(cos_sin.load(q), c + 4 * q);
      float4_to_array(cos_sin.load(kQuads + q), s + 4 * q);
    }
    if constexpr (kNeox) {
#pragma unroll
      for (int32_t j = 0; j < 8; ++j)
        x[j] = fmaf(x[j], c[j], -(other[j] * s[j]));
    } else {
#pragma unroll
      for (int32_t m = 0; m < 4; ++m)
        rope_rotate_pair(x[2 * m], x[2 * m + 1], c[m], s[m], &x[2 * m], &x[2 * m + 1]);
    }
  }
};

// A lane's cos/sin of one token as loaded (or computed), before they go to its slots: split from
// store_token_rope_lanes so that a schedule can issue the cos/sin cache loads, then its row
// loads, and only then wait for the cos/sin (rope_quant_append_ring.cu).
template <int32_t kHeadDim, bool kNeox>
struct TokenCosSin {
  float c[8];
  float s[8];       // as in the cache: not yet negated for neox second-half lanes
  int32_t partner;  // see TokenRopeLanes
  bool rotated;
  bool negate_sin;  // neox second-half lane
};

// cos/sin of the lane's dims at position pos (cache row or sincos, see rope_angles_device.cuh).
template <int32_t kHeadDim, bool kNeox, bool kFromCache>
__device__ __forceinline__ TokenCosSin<kHeadDim, kNeox> load_token_cos_sin(
    const RopeAngles& angles, const float* smem_inv_freq, int32_t pos,
    const RowLane<kHeadDim>& row) {
  TokenCosSin<kHeadDim, kNeox> r;
  const int32_t first_elem = 8 * row.lane;
  r.rotated = first_elem < angles.rotary_dim;
  r.partner = static_cast<int32_t>(threadIdx.x) & 31;
  r.negate_sin = false;
  if (!r.rotated) return r;
  if constexpr (kNeox) {
    const int32_t half_lanes = angles.rotary_dim / 16;
    const bool first_half = row.lane < half_lanes;
    r.partner += first_half ? half_lanes : -half_lanes;
    r.negate_sin = !first_half;
    const int32_t first_pair = first_half ? first_elem : first_elem - angles.rotary_dim / 2;
    rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_pair, r.c, r.s);
    rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_pair + 4, r.c + 4, r.s + 4);
  } else {
    rope_cos_sin4<kFromCache>(angles, smem_inv_freq, pos, first_elem / 2, r.c, r.s);
  }
  return r;
}

// The lane's rope state from its cos/sin, stored into its slots [0, kSlots) of `slots`.
template <int32_t kHeadDim, bool kNeox, int32_t kThreads>
__device__ __forceinline__ TokenRopeLanes<kHeadDim, kNeox, kThreads> store_token_rope_lanes(
    const TokenCosSin<kHeadDim, kNeox>& cs, LaneSlots<kThreads> slots) {
  TokenRopeLanes<kHeadDim, kNeox, kThreads> r;
  r.cos_sin = slots;
  r.rotated = cs.rotated;
  r.partner = cs.partner;
  if (!r.rotated) return r;
  float s[8];
#pragma unroll
  for (int32_t j = 0; j < 8; ++j)
    s[j] = cs.negate_sin ? -cs.s[j] : cs.s[j];
#pragma unroll
  for (int32_t q = 0; q < r.kQuads; ++q) {
    slots.store(q, make_float4(cs.c[4 * q], cs.c[4 * q + 1], cs.c[4 * q + 2], cs.c[4 * q + 3]));
    slots.store(r.kQuads + q, make_float4(s[4 * q], s[4 * q + 1], s[4 * q + 2], s[4 * q + 3]));
  }
  return r;
}

}  // namespace quench
