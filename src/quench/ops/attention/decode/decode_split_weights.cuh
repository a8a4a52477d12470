// The merge weights of one output row's split-KV partials, from the splits' log-sum-exps, for
// both merge places: the merge kernel (RowMerge, decode_row_merge.cuh) and the last split CTA
// (ItemMerge, decode_item_merge.cuh).
#pragma once

#include <cmath>
#include <cstdint>

#include "quench/numerics/fast_math.cuh"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {

// Lane `lane`'s share of a row's weights: splits lane and lane + 32.
struct SplitWeights {
  float w0;         // 2^(lse_lane - total_max); 0 for a split that saw no token
  float w1;         // the same for split lane + 32
  float total_max;  // the row's largest split LSE and its sink, log2 units
  float denom;      // every split's weight plus the sink's, warp-reduced
};

static_assert(kMaxSplits <= 64, "one warp holds a row's splits in two registers per lane");

// Run by one full warp for output row `row` (= token * num_q_heads + q head `head`) of a launch
// whose split partials have `split_rows` rows each; splits at or past num_splits (args.num_splits
// but for the merge kernel's warm-up pass, 0) are not read.
__device__ __forceinline__ SplitWeights split_weights(const DecodeKernelArgs& args, int64_t row,
                                                      int64_t split_rows, int32_t head, int lane,
                                                      int num_splits) {
  constexpr float kLog2e = 1.4426950408889634f;
  const AttentionParams& p = args.p;
  const float lse0 =
      lane < num_splits ? __ldcg(args.partial_lse + lane * split_rows + row) : -INFINITY;
  const float lse1 = lane + 32 < num_splits
                         ? __ldcg(args.partial_lse + (lane + 32) * split_rows + row)
                         : -INFINITY;
  float max_lse = fmaxf(lse0, lse1);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
  const float sink = p.sinks != nullptr ? p.sinks[head] * kLog2e : -INFINITY;
  SplitWeights weights;
  weights.total_max = fmaxf(max_lse, sink);
  weights.w0 = lse0 == -INFINITY ? 0.0f : fast_exp2(lse0 - weights.total_max);
  weights.w1 = lse1 == -INFINITY ? 0.0f : fast_exp2(lse1 - weights.total_max);
  float denom = weights.w0 + weights.w1;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    denom += __shfl_xor_sync(0xffffffffu, denom, offset);
  if (p.sinks != nullptr) denom += fast_exp2(sink - weights.total_max);
  weights.denom = denom;
  return weights;
}

}  // namespace quench::decode
