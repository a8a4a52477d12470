// Split-KV merge of ONE output row (query token, q head) by one CTA of kMergeThreads threads:
// combines the row's num_splits partial outputs by their log-sum-exp (and the attention sink,
// when present), then runs the output epilogue. decode_merge_kernel runs it on every row.
//
// It costs one memory latency per row: every thread owns one float4 column chunk of the row in a
// group of splits and issues all its loads at once, before the weights are known (the LSEs load
// in parallel with them); the groups' sums then meet in shared memory.
//
// Its code is small on purpose (a few KB of SASS): every merging CTA runs it on an SM whose
// instruction cache does not hold it. A multi-row variant that stepped through (row, split) units
// 16x unrolled, with runtime divisions and float atomics to shared (CAS loops), compiled to
// ~100 KB of straight-line SASS; fetching that cold cost ~7 us per load round on the H200
// (B1 x 1k decode: 7.3 -> 14.9 us), far more than the merge itself.
#pragma once

#include <cstdint>

#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_output.cuh"
#include "quench/ops/attention/decode/decode_split_weights.cuh"

namespace quench::decode {

// Threads that merge together: the merge kernel's CTA, the main kernel's compute warps.
inline constexpr int kMergeThreads = kThreads;

template <int kHeadDim>
struct RowMerge {
  static constexpr int kChunks = kHeadDim / 4;                    // float4 column chunks of a row
  static constexpr int kGroups = kMergeThreads / kChunks;         // split groups: 8, 4 or 2
  static constexpr int kPerGroup = kMaxSplits / kGroups;          // most splits one thread visits
  static constexpr int kBatch = kPerGroup < 16 ? kPerGroup : 16;  // loads in flight per thread
  static_assert(kChunks * kGroups == kMergeThreads, "head_dim 64, 128 or 256");

  // Shared memory of one merging CTA.
  struct Scratch {
    float weights[kMaxSplits];
    float row_stats[2];  // total max (log2 units), denominator
    __align__(16) float sums[kGroups][kHeadDim];
    uint32_t is_last;  // the main kernel's "this CTA merges" flag
  };

  // Merges row `row` (= token * num_q_heads + q head) of args.partial_* and writes its output
  // (and lse). Run by kMergeThreads threads (tid = 0..kMergeThreads-1) that `sync()`
  // synchronises; `sync()` also ends the call, so the next call may reuse `scratch`. The
  // partials are read through L2 (ld.global.cg): other CTAs of a grid still running (the main
  // kernel's other splits) wrote them, which this SM's L1 does not see.
  // A `dry` call (the merge kernel's warm-up pass) runs the same instructions over no splits:
  // it reads nothing the main kernel writes, and writes the row's output (zeros) and lse to the
  // places that the real call for the row, by the same threads, writes afterwards.
  template <class Sync>
  static __device__ __forceinline__ void merge_row(const DecodeKernelArgs& args, int64_t row,
                                                   Scratch& scratch, int tid, Sync sync, bool dry) {
    constexpr float kLn2 = 0.6931471805599453f;
    const AttentionParams& p = args.p;
    const int chunk = tid % kChunks;
    const int group = tid / kChunks;
    const int num_splits = dry ? 0 : args.num_splits;
    const int64_t split_rows = static_cast<int64_t>(p.num_tokens) * p.num_q_heads;
    const int32_t head = static_cast<int32_t>(row % p.num_q_heads);
    const int32_t token = static_cast<int32_t>(row / p.num_q_heads);
    const float4* column = reinterpret_cast<const float4*>(args.partial_o + row * kHeadDim) + chunk;
    const int64_t split_stride = split_rows * kChunks;  // float4s from one split to the next

    // This thread's first batch of partial chunks (splits group, group + kGroups, ...), issued
    // before the weights exist: a split that saw no token has an unwritten (arbitrary) chunk,
    // which its zero weight keeps out below.
    float4 x[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int s = group + i * kGroups;
      x[i] =
          s < num_splits ? __ldcg(column + s * split_stride) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    if (tid < 32) {
      const int lane = tid;
      const SplitWeights w = split_weights(args, row, split_rows, head, lane, num_splits);
      scratch.weights[lane] = w.w0;
      scratch.weights[lane + 32] = w.w1;
      if (lane == 0) scratch.row_stats[0] = w.total_max, scratch.row_stats[1] = w.denom;
    }
    sync();

    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const auto add = [&](const float4& v, int s) {
      const float w = s < num_splits ? scratch.weights[s] : 0.0f;
      if (w != 0.0f) {
        acc.x += w * v.x, acc.y += w * v.y;
        acc.z += w * v.z, acc.w += w * v.w;
      }
    };
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      add(x[i], group + i * kGroups);
    for (int s0 = group + kBatch * kGroups; s0 < num_splits; s0 += kBatch * kGroups) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int s = s0 + i * kGroups;
        x[i] = s < num_splits ? __ldcg(column + s * split_stride)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        add(x[i], s0 + i * kGroups);
    }
    *reinterpret_cast<float4*>(&scratch.sums[group][4 * chunk]) = acc;
    sync();

    // The epilogue: 4 consecutive elements per thread (write_output_quad), in whole warps.
    const float total_max = scratch.row_stats[0];
    const float denom = scratch.row_stats[1];
    constexpr int kQuads = kHeadDim / kOutputQuad;
    if (tid < (kQuads + 31) / 32 * 32) {
      const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
      const int quad = tid < kQuads ? tid : kQuads - 1;
      float v[kOutputQuad];
#pragma unroll
      for (int k = 0; k < kOutputQuad; ++k) {
        float sum = 0.0f;
#pragma unroll
        for (int g = 0; g < kGroups; ++g)
          sum += scratch.sums[g][kOutputQuad * quad + k];
        v[k] = sum * inv;
      }
      write_output_quad(p, token, head, kOutputQuad * quad, v, tid < kQuads);
    }
    if (tid == 0 && p.lse != nullptr) p.lse[row] = (total_max + __log2f(denom)) * kLn2;
    sync();  // weights, row_stats and sums are rewritten by the next call
  }
};

}  // namespace quench::decode
