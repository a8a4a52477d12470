// Qwen3's per-head RMSNorm folded into the RoPE rotation, for the fused kernel's norm path.
// With y = x * r * w (r = 1 / sqrt(mean(x^2) + eps) of the head row, w the bf16 weights), the
// rotated element j of a lane is
//   y'_j = y_j * c_j - y_o * s'_j = r * (x_j * (w_j c_j) - x_o * (w_o s'_j)),
// where o is the element that j rotates with (neox: the same index in the partner lane; gptj:
// the other element of its pair, in the same lane) and s' carries the sign of the pair formula
// (rope_rotate_pair). So per lane and token, for q and for k: A_j = w_j c_j, B_j = w_o s'_j
// (past rotary_dim: A_j = w_j, B_j = 0); per row: one sum-of-squares reduction, one rsqrt, two
// operations per element, and r goes into the caller's output multiplier (with 1 / scale).
// Against the reference (x / sqrt(...) * w, then rope_rotate_pair, then / scale) the roundings
// happen in another order: results differ by a few float ulps before the single rounding to
// bf16/FP8, inside SPEC's and the tests' tolerance for the norm path (never bit-exact).
#pragma once

#include <cstdint>

#include "quench/numerics/bf16.h"
#include "quench/ops/quantize/vec8_convert.cuh"
#include "quench/ops/rope_quant_append/token_rope_lanes.cuh"

namespace quench {

// Which weights a row is normalized with.
enum class NormKind : int32_t { kQ = 0, kK = 1 };

template <int32_t kHeadDim, bool kNeox, int32_t kThreads>
struct NormRopeLanes {
  static constexpr int32_t kSlotsPerKind = 4;  // A_0..7, then B_0..7, as float4
  static constexpr int32_t kSlots = 2 * kSlotsPerKind;
  LaneSlots<kThreads> coefs;  // [kind * 4, kind * 4 + 4): A lo, A hi, B lo, B hi
  int32_t partner;  // neox: warp lane holding the partner elements (own lane if unrotated)

  // Normalizes and rotates the row held by x in place, except for the factor r, which it
  // returns: the caller multiplies it into the output (x_j * r is the normalized, rotated
  // element). Every lane of the group calls it (shuffles inside).
  __device__ __forceinline__ float apply(float x[8], NormKind kind, uint32_t mask,
                                         float eps) const {
    constexpr int32_t kLanes = RowLane<kHeadDim>::kLanes;
    float sum_sq = 0.0f;
#pragma unroll
    for (int32_t j = 0; j < 8; ++j)
      sum_sq = fmaf(x[j], x[j], sum_sq);
#pragma unroll
    for (int32_t offset = kLanes / 2; offset > 0; offset /= 2)
      sum_sq += __shfl_xor_sync(mask, sum_sq, offset, kLanes);
    float other[8];
    if constexpr (kNeox) {
#pragma unroll
      for (int32_t j = 0; j < 8; ++j)
        other[j] = __shfl_sync(mask, x[j], partner);
    } else {
#pragma unroll
      for (int32_t j = 0; j < 8; ++j)
        other[j] = x[j ^ 1];
    }
    const int32_t at = static_cast<int32_t>(kind) * kSlotsPerKind;
    float a[8], b[8];
    float4_to_array(coefs.load(at), a);
    float4_to_array(coefs.load(at + 1), a + 4);
    float4_to_array(coefs.load(at + 2), b);
    float4_to_array(coefs.load(at + 3), b + 4);
#pragma unroll
    for (int32_t j = 0; j < 8; ++j)
      x[j] = fmaf(x[j], a[j], -(other[j] * b[j]));
    // head_dim is a power of two: the multiply is the exact mean.
    return rsqrtf(fmaf(sum_sq, 1.0f / static_cast<float>(kHeadDim), eps));
  }
};

// The lane's eight bf16 weights of a norm weight vector (bf16 [head_dim]), as loaded.
template <int32_t kHeadDim>
__device__ __forceinline__ uint4 load_norm_weights(const uint16_t* weight,
                                                   const RowLane<kHeadDim>& row) {
  return __ldg(reinterpret_cast<const uint4*>(weight) + row.lane);
}

// The lane's A/B of one weight vector (its eight bf16 weights `weight_bits`, see
// load_norm_weights) from its cos c and signed sin s (see TokenRopeLanes: neox second-half lanes
// hold -sin), into slots [kind * 4, kind * 4 + 4).
template <int32_t kHeadDim, bool kNeox, int32_t kThreads>
__device__ __forceinline__ void stage_norm_rope_kind(
    const NormRopeLanes<kHeadDim, kNeox, kThreads>& n, uint4 weight_bits, NormKind kind,
    const RowLane<kHeadDim>& row, bool rotated, const float c[8], const float s[8]) {
  float w[8];
  unpack_bf16x8(weight_bits, w);
  float w_other[8];
  if constexpr (kNeox) {
#pragma unroll
    for (int32_t j = 0; j < 8; ++j)
      w_other[j] = __shfl_sync(row.mask, w[j], n.partner);
  }
  float a[8], b[8];
#pragma unroll
  for (int32_t j = 0; j < 8; ++j) {
    if constexpr (kNeox) {
      // neox: c[j], s[j] belong to element j; the partner's x_j rotates with it.
      a[j] = w[j] * c[j];
      b[j] = w_other[j] * s[j];
    } else {
      // gptj pair m = (2m, 2m+1): out_2m = x_2m c - x_2m+1 s, out_2m+1 = x_2m+1 c + x_2m s.
      const int32_t m = j / 2;
      a[j] = w[j] * c[m];
      b[j] = j % 2 == 0 ? w[j + 1] * s[m] : -(w[j - 1] * s[m]);
    }
    if (!rotated) {
      a[j] = w[j];
      b[j] = 0.0f;
    }
  }
  const int32_t at = static_cast<int32_t>(kind) * n.kSlotsPerKind;
  n.coefs.store(at, make_float4(a[0], a[1], a[2], a[3]));
  n.coefs.store(at + 1, make_float4(a[4], a[5], a[6], a[7]));
  n.coefs.store(at + 2, make_float4(b[0], b[1], b[2], b[3]));
  n.coefs.store(at + 3, make_float4(b[4], b[5], b[6], b[7]));
}

// Turns the token's rope state (cos/sin in its slots, see store_token_rope_lanes) into the q and
// k coefficients, overwriting those slots: slots must have NormRopeLanes::kSlots entries.
// q_weight / k_weight: the lane's norm weights (load_norm_weights). All lanes of the warp call it
// (shuffles inside).
template <int32_t kHeadDim, bool kNeox, int32_t kThreads>
__device__ __forceinline__ NormRopeLanes<kHeadDim, kNeox, kThreads> make_norm_rope_lanes(
    const TokenRopeLanes<kHeadDim, kNeox, kThreads>& rope, uint4 q_weight, uint4 k_weight,
    const RowLane<kHeadDim>& row) {
  using Rope = TokenRopeLanes<kHeadDim, kNeox, kThreads>;
  NormRopeLanes<kHeadDim, kNeox, kThreads> n;
  n.coefs = rope.cos_sin;
  n.partner = rope.partner;
  float c[8] = {}, s[8] = {};
  if (rope.rotated) {
#pragma unroll
    for (int32_t q = 0; q < Rope::kQuads; ++q) {
      float4_to_array(rope.cos_sin.load(q), c + 4 * q);
      float4_to_array(rope.cos_sin.load(Rope::kQuads + q), s + 4 * q);
    }
  }
  stage_norm_rope_kind(n, q_weight, NormKind::kQ, row, rope.rotated, c, s);
  stage_norm_rope_kind(n, k_weight, NormKind::kK, row, rope.rotated, c, s);
  return n;
}

}  // namespace quench
