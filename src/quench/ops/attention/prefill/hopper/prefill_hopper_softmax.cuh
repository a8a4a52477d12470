// The online softmax of one S tile in the Hopper prefill kernels: the per-thread score transform
// (scales, causal and window masks, soft-cap) and the row max / sum / exponent update in
// registers, shared by the synchronous and the warp-specialized kernels.
#pragma once

#include <cstdint>

#include "quench/numerics/fast_math.cuh"

namespace quench::prefill_hopper {

#ifdef QUENCH_SM90A_ENABLED

// What scales and masks the S accumulators of one thread's two rows (packed rows lane / 4 and
// lane / 4 + 8 of its warp); fixed for the CTA. Shared by both Hopper kernels.
struct ScoreTransform {
  float score_scale;     // sm_scale * q_scale (FP8 q only) * k_scale: multiplies raw Q K^T
  float logit_soft_cap;  // > 0 (the kernel's kSoftCap): scores become cap * tanh(score / cap)
  int window_left;       // -1: no sliding window
  int pos_lo;            // lowest / highest absolute position among the CTA's rows
  int pos_hi;
  int row_pos[2];     // absolute position of this thread's two rows
  int lane_in_group;  // lane % 4: which key pair of each 8-key column block the thread holds
};

// Whether the tile of keys kv0 .. kv0 + kBlockN - 1 holds a key past one of the CTA's rows
// (causal) or before one's sliding window; uniform over the CTA. All but a few tiles per CTA
// need no mask.
template <int kBlockN>
__device__ __forceinline__ bool tile_needs_mask(const ScoreTransform& t, int kv0) {
  return kv0 + kBlockN - 1 > t.pos_lo || (t.window_left >= 0 && kv0 < t.pos_hi - t.window_left);
}

// Updates the online softmax state of the thread's rows with one S tile (row_max in log2 units,
// row_sum this thread's partial) and turns S into P, whose max-relative scale changed by
// `correction` per row. O is left to the caller, which multiplies it by `correction` once it is
// not in flight. Without soft-cap the raw scores stay as they are: t.score_scale > 0 (every
// scale is finite and > 0, see attention_reference.cc), so the row max of the raw scores, times
// score_scale * log2(e), is the row max in log2 units, and each P element is one FFMA and one
// ex2: exp2(s * c - max * c). With soft-cap (kSoftCap: t.logit_soft_cap > 0, chosen on the host)
// the scores first become cap * tanh(score / cap) in log2 units. Tiles that tile_needs_mask are
// masked (-inf) before the max. P (and row_sum) come out times 2^kPScaleLog2, folded into the
// exp2's FFMA (FP8 P V's kPScale, which would otherwise cost one FMUL per element).
// Code size is the point of the shape (instruction-cache stalls): the soft-cap switch is a
// template parameter, and the mask is a separate pass behind one uniform branch. Runtime
// switches inside the fully unrolled element loop made the compiler keep a copy of the whole
// unrolled body per combination.
// kStaleMaxSixteenths > 0 (the warp-specialized consumers' 16-bit P): a row keeps its running
// max until a tile's max exceeds it by more than kStaleMaxSixteenths / 16 (log2 units), so P may
// reach 2^(kPScaleLog2 + that) and `correction` is exactly 1 on most tiles of a long row; the sum
// and O stay relative to the same max, so the result is the same up to rounding. The consumers
// skip their O rescale where every row of a warp has correction 1.
template <int kBlockN, bool kSoftCap, int kPScaleLog2 = 0, int kStaleMaxSixteenths = 0>
__device__ __forceinline__ void online_softmax_tile(const ScoreTransform& t, int kv0,
                                                    float (&s)[kBlockN / 2], float (&row_max)[2],
                                                    float (&row_sum)[2], float (&correction)[2]) {
  constexpr float kLog2e = 1.4426950408889634f;
  float to_log2;  // multiplies s into log2 units
  if constexpr (kSoftCap) {
    // One division per tile, not per element: (s * scale) / cap compiled to a full-precision
    // division per element (a slow-path CALL and FCHK each, 64 per tile and thread).
    const float scale_over_cap = t.score_scale / t.logit_soft_cap;
    const float cap_log2 = t.logit_soft_cap * kLog2e;
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i)
      s[i] = cap_log2 * fast_tanh(s[i] * scale_over_cap);
    to_log2 = 1.0f;
  } else {
    to_log2 = t.score_scale * kLog2e;
  }
  if (tile_needs_mask<kBlockN>(t, kv0)) {
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = kv0 + nt * 8 + 2 * t.lane_in_group + (e & 1);
        const int pos = t.row_pos[e / 2];
        if (j > pos || (t.window_left >= 0 && j < pos - t.window_left)) s[4 * nt + e] = -INFINITY;
      }
    }
  }
  // Each row's max and sum run as kParts independent partial chains: a single running max /
  // sum made each a chain of kBlockN / 4 dependent FMNMX / FADD, and a row's exps could not
  // start before its whole max chain (and the shuffles) had retired. H200: FP8 P·V +1.5-1.8% at
  // 8k-16k tokens, the other kinds even (bench/LOG.md, tenth session). Max is exact in any
  // order; the sum's order changes its rounding only.
  constexpr int kParts = 4;  // the two combining lines below take four
  constexpr int kColumnBlocks = kBlockN / 8;
  static_assert(kColumnBlocks % kParts == 0, "every partial chain takes the same blocks");
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float part[kParts];
#pragma unroll
    for (int k = 0; k < kParts; ++k)
      part[k] = fmaxf(s[4 * k + 2 * r], s[4 * k + 2 * r + 1]);
#pragma unroll
    for (int nt = kParts; nt < kColumnBlocks; ++nt)
      part[nt % kParts] = fmaxf(part[nt % kParts], fmaxf(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]));
    float tile_max = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    float new_max;
    if constexpr (kStaleMaxSixteenths == 0) {
      new_max = fmaxf(row_max[r], tile_max * to_log2);
    } else {
      // -inf + margin stays -inf: a row's first unmasked tile always sets its max.
      constexpr float kMargin = static_cast<float>(kStaleMaxSixteenths) / 16.0f;
      const float candidate = tile_max * to_log2;
      new_max = candidate > row_max[r] + kMargin ? candidate : row_max[r];
    }
    // A row that has seen only masked keys keeps max -inf; subtract 0 to avoid inf - inf.
    const float offset = new_max == -INFINITY ? 0.0f : new_max;
    correction[r] = fast_exp2(row_max[r] - offset);
    row_max[r] = new_max;
    const float p_offset = offset - static_cast<float>(kPScaleLog2);
    float sum[kParts] = {};
#pragma unroll
    for (int nt = 0; nt < kColumnBlocks; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float& e = s[4 * nt + 2 * r + c];
        e = fast_exp2(fmaf(e, to_log2, -p_offset));
        sum[nt % kParts] += e;
      }
    }
    row_sum[r] = fmaf(row_sum[r], correction[r], (sum[0] + sum[1]) + (sum[2] + sum[3]));
  }
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
