// Split-KV merge of a set of output rows (query token, q head): combines each row's num_splits
// partial outputs by their log-sum-exp (and the attention sink, when present), then runs the
// output epilogue. One device function for both places that merge: decode_merge_kernel (one row
// per CTA) and the main kernel's last split CTA of a work item (the item's rows, up to 16).
//
// The merge sits on the critical path of every decode step with splits (small batches, long
// contexts: up to 64 splits per row), so it costs as few memory latencies as the registers allow:
// every thread owns one float4 column chunk in a slot of (row, split) units and issues a batch of
// kBatch loads at once, before the weights are known (the LSEs load in parallel with them); the
// rows' sums then meet in shared memory. A row of 64 splits is one round trip; the 4 rows x 64
// splits of a GQA-4 work item four; 4 rows x 8 splits one. (One warp per row with the splits in
// rounds of 8 took 9 us for 49 splits x 32 rows on the H200, cold caches.)
//
// The partials are read through L2 (ld.global.cg): in the main kernel they were written by other
// CTAs of the same grid, which the SM's L1 does not see.
#pragma once

#include <cstdint>

#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_output.cuh"

namespace quench::decode {

// Threads that merge together: the merge kernel's CTA, the main kernel's compute warps.
inline constexpr int kMergeThreads = kThreads;

// The rows a merge covers, r = 0..num_rows-1: query token q_begin + (row0 + r) / group, q head
// head_base + (row0 + r) % group (the main kernel's row numbering; the merge kernel's single row
// is q_begin = token, row0 = 0, group = 1, head_base = head).
struct MergeRows {
  int32_t q_begin = 0;
  int32_t row0 = 0;
  int32_t group = 1;
  int32_t head_base = 0;
  int32_t num_rows = 1;
  __device__ __forceinline__ int32_t token(int r) const { return q_begin + (row0 + r) / group; }
  __device__ __forceinline__ int32_t head(int r) const { return head_base + (row0 + r) % group; }
};

template <int kHeadDim, int kMaxRows>
struct SplitMerge {
  static constexpr int kChunks = kHeadDim / 4;              // float4 column chunks of a row
  static constexpr int kSlots = kMergeThreads / kChunks;    // threads per chunk: 8, 4 or 2
  static constexpr int kMostUnits = kMaxRows * kMaxSplits;  // (row, split) units
  static constexpr int kPerSlot = kMostUnits / kSlots;
  static constexpr int kBatch = kPerSlot < 16 ? kPerSlot : 16;  // loads in flight per thread
  static_assert(kChunks * kSlots == kMergeThreads, "head_dim 64, 128 or 256");

  // Shared memory of one merging CTA.
  struct Scratch {
    float weights[kMaxRows][kMaxSplits];  // LSEs (log2 units), then the splits' weights
    float row_max[kMaxRows];              // log2 units, sink included
    float row_denom[kMaxRows];
    uint32_t is_last;  // the main kernel's "this CTA merges" flag
    __align__(16) float sums[kMaxRows][kHeadDim];
  };

  // Merges rows.num_rows (<= kMaxRows) rows of args.partial_* and writes their output (and lse).
  // Run by kMergeThreads threads (tid = 0..kMergeThreads-1) that `sync()` synchronises; `sync()`
  // also ends the call, so another call may reuse `scratch`. Not inlined: its kBatch float4 loads
  // in flight would otherwise join the main kernel's register allocation (96 per thread in the
  // swapped kernel), which then spilled in ptxas.
  template <class Sync>
  static __device__ __noinline__ void merge_rows(const DecodeKernelArgs& args,
                                                 const MergeRows& rows, Scratch& scratch, int tid,
                                                 Sync sync) {
    constexpr float kLog2eMerge = 1.4426950408889634f;
    constexpr float kLn2Merge = 0.6931471805599453f;
    const AttentionParams& p = args.p;
    const int num_rows = rows.num_rows;
    const int num_splits = args.num_splits;
    const int num_units = num_rows * num_splits;  // unit u: row u / num_splits, split u % ..
    const int64_t split_rows = static_cast<int64_t>(p.num_tokens) * p.num_q_heads;
    auto row_index = [&](int r) {
      return static_cast<int64_t>(rows.token(r)) * p.num_q_heads + rows.head(r);
    };
    const int chunk = tid % kChunks;
    const int slot = tid / kChunks;
    // Units slot, slot + kSlots, ... in order; (r, s) of the next one, advanced incrementally.
    auto partial_chunk = [&](int r, int s) {
      return __ldcg(reinterpret_cast<const float4*>(args.partial_o +
                                                    (s * split_rows + row_index(r)) * kHeadDim) +
                    chunk);
    };
    auto advance = [&](int& r, int& s) {
      s += kSlots;
      while (s >= num_splits)
        s -= num_splits, ++r;
    };

    // This thread's first batch of partial chunks, issued before the weights exist: a split that
    // saw no token has an unwritten (arbitrary) chunk, which its zero weight keeps out below.
    float4 x[kBatch];
    int r_load = 0, s_load = slot;
    while (s_load >= num_splits && r_load < num_rows)
      s_load -= num_splits, ++r_load;
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      x[i] =
          r_load < num_rows ? partial_chunk(r_load, s_load) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      advance(r_load, s_load);
    }
    // The LSEs, all loads in flight together (kMaxSplits slots per row, -inf past num_splits).
    constexpr int kLseLoads = (kMaxRows * kMaxSplits + kMergeThreads - 1) / kMergeThreads;
    float lse[kLseLoads];
#pragma unroll
    for (int k = 0; k < kLseLoads; ++k) {
      const int r = (tid + k * kMergeThreads) / kMaxSplits;
      const int s = (tid + k * kMergeThreads) % kMaxSplits;
      lse[k] = r < num_rows && s < num_splits
                   ? __ldcg(args.partial_lse + s * split_rows + row_index(r))
                   : -INFINITY;
    }
#pragma unroll
    for (int k = 0; k < kLseLoads; ++k) {
      const int r = (tid + k * kMergeThreads) / kMaxSplits;
      if (r < num_rows) scratch.weights[r][(tid + k * kMergeThreads) % kMaxSplits] = lse[k];
    }
    for (int i = tid; i < num_rows * kHeadDim; i += kMergeThreads)
      scratch.sums[i / kHeadDim][i % kHeadDim] = 0.0f;
    sync();

    // Per row (one warp each): the total max and denominator, and the splits' weights.
    const int warp = tid / 32, lane = tid % 32;
    for (int r = warp; r < num_rows; r += kMergeThreads / 32) {
      const float lse0 = scratch.weights[r][lane];
      const float lse1 = scratch.weights[r][lane + 32];  // kMaxSplits = 64
      float max_lse = fmaxf(lse0, lse1);
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, offset));
      const float sink = p.sinks != nullptr ? p.sinks[rows.head(r)] * kLog2eMerge : -INFINITY;
      const float total_max = fmaxf(max_lse, sink);
      const float w0 = lse0 == -INFINITY ? 0.0f : fast_exp2(lse0 - total_max);
      const float w1 = lse1 == -INFINITY ? 0.0f : fast_exp2(lse1 - total_max);
      float denom = w0 + w1;
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        denom += __shfl_xor_sync(0xffffffffu, denom, offset);
      if (p.sinks != nullptr) denom += fast_exp2(sink - total_max);
      scratch.weights[r][lane] = w0;
      scratch.weights[r][lane + 32] = w1;
      if (lane == 0) scratch.row_max[r] = total_max, scratch.row_denom[r] = denom;
    }
    sync();

    // Weighted sums, one float4 accumulator per thread, flushed into the row's shared sums
    // whenever the thread's units move on to the next row.
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    int r_acc = 0, s_acc = slot;
    while (s_acc >= num_splits && r_acc < num_rows)
      s_acc -= num_splits, ++r_acc;
    int acc_row = r_acc;
    const auto flush = [&]() {
      if (acc_row < num_rows) {
        float* dst = &scratch.sums[acc_row][4 * chunk];
        atomicAdd(dst, acc.x), atomicAdd(dst + 1, acc.y);
        atomicAdd(dst + 2, acc.z), atomicAdd(dst + 3, acc.w);
      }
      acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    };
    const auto add = [&](const float4& v) {
      if (r_acc >= num_rows) return;
      if (r_acc != acc_row) flush(), acc_row = r_acc;
      const float w = scratch.weights[r_acc][s_acc];
      if (w != 0.0f) {
        acc.x += w * v.x, acc.y += w * v.y;
        acc.z += w * v.z, acc.w += w * v.w;
      }
    };
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      add(x[i]);
      advance(r_acc, s_acc);
    }
    for (int u0 = slot + kBatch * kSlots; u0 < num_units; u0 += kBatch * kSlots) {
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        x[i] =
            r_load < num_rows ? partial_chunk(r_load, s_load) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        advance(r_load, s_load);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        add(x[i]);
        advance(r_acc, s_acc);
      }
    }
    flush();
    sync();

    // The epilogue works on 16 consecutive elements (one NVFP4 block) per thread.
    constexpr int kBlocksPerRow = kHeadDim / 16;
    for (int unit = tid; unit < num_rows * kBlocksPerRow; unit += kMergeThreads) {
      const int r = unit / kBlocksPerRow;
      const int d0 = unit % kBlocksPerRow * 16;
      const float denom = scratch.row_denom[r];
      const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
      float v[16];
#pragma unroll
      for (int k = 0; k < 16; ++k)
        v[k] = scratch.sums[r][d0 + k] * inv;
      write_output_block16(p, rows.token(r), rows.head(r), d0, v);
      if (d0 == 0 && p.lse != nullptr)
        p.lse[row_index(r)] = (scratch.row_max[r] + __log2f(denom)) * kLn2Merge;
    }
    sync();  // the scratch may be rewritten by the next call
  }
};

}  // namespace quench::decode
