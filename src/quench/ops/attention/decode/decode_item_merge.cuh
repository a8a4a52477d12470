// Split-KV merge of ALL the rows of one work item (request, KV head, row group: up to
// kRowsPerCta query rows) by the work item's last split CTA, inside the main decode kernel
// (args.last_split_merges). The separate merge kernel keeps RowMerge (decode_row_merge.cuh).
//
// Why not RowMerge row after row: each row cost its own L2 round trips and CTA barriers, and its
// 16-deep load batch spilled (36 registers) in the 96-register swapped kernel. Here the compute
// threads share out (row, float4 column chunk) units, all rows at once: at 4 rows x head_dim 128
// the 128 units are one per thread. A thread walks its unit's splits kBatch independent 16-byte
// L2 loads at a time; its first batch is issued before the weights, which one warp per row
// computes from the row's num_splits log-sum-exps (each read once) meanwhile. The summed chunks
// meet in shared memory, where threads of 4 consecutive elements run the output epilogue.
//
// The code is small on purpose (the last CTA fetches it cold): one unrolled batch, plain loops.
#pragma once

#include <cstdint>

#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_output.cuh"
#include "quench/ops/attention/decode/decode_split_weights.cuh"

namespace quench::decode {

template <int kHeadDim>
struct ItemMerge {
  static constexpr int kChunks = kHeadDim / 4;  // float4 column chunks of a row
  // Partial loads in flight per thread (64 registers: the swapped kernel's 96 hold them without
  // a spill, ptxas); 32 splits are two load rounds.
  static constexpr int kBatch = 16;

  // Shared memory of the merging CTA (the main kernel's combine buffer, free by then).
  struct Scratch {
    float weights[kRowsPerCta][kMaxSplits];  // 2^(lse_s - total max); 0: split saw no token
    float inv_denom[kRowsPerCta];
    __align__(16) float out[kRowsPerCta][kHeadDim];  // merged, normalised rows
    uint32_t is_last;                                // the main kernel's "this CTA merges" flag
  };

  // Merges the work item's rows r = 0..num_rows-1 (query token q_begin + (row0 + r) / group, q
  // head head_base + (row0 + r) % group) from args.partial_* and writes their outputs (and
  // lse). Run by the kThreads compute threads (tid 0..kThreads-1), `sync()` syncs them. The
  // partials are read through L2 (ld.global.cg): the other split CTAs wrote them, which this
  // SM's L1 does not see.
  template <class Sync>
  static __device__ __forceinline__ void merge(const DecodeKernelArgs& args, int32_t q_begin,
                                               int32_t row0, int32_t group, int32_t head_base,
                                               int32_t num_rows, Scratch& scratch, int tid,
                                               Sync sync) {
    constexpr float kLn2 = 0.6931471805599453f;
    const AttentionParams& p = args.p;
    const int num_splits = args.num_splits;
    const int64_t split_rows = static_cast<int64_t>(p.num_tokens) * p.num_q_heads;
    const int64_t split_stride = split_rows * kChunks;  // float4s from one split to the next
    const auto token_of = [&](int r) { return q_begin + (row0 + r) / group; };
    const auto head_of = [&](int r) { return head_base + (row0 + r) % group; };
    const auto row_of = [&](int r) {
      return static_cast<int64_t>(token_of(r)) * p.num_q_heads + head_of(r);
    };
    const auto column_of = [&](int unit) {
      return reinterpret_cast<const float4*>(args.partial_o + row_of(unit / kChunks) * kHeadDim) +
             unit % kChunks;
    };
    // Splits s0 .. s0 + kBatch - 1 of a unit's chunk; a split that saw no token has an unwritten
    // (arbitrary) chunk, which its zero weight keeps out.
    float4 x[kBatch];
    const auto load_batch = [&](const float4* column, int s0) {
      const float4* at = column + s0 * split_stride;  // one 64-bit add per load, no multiply
#pragma unroll
      for (int i = 0; i < kBatch; ++i, at += split_stride)
        x[i] = s0 + i < num_splits ? __ldcg(at) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    };
    const int units = num_rows * kChunks;
    if (tid < units) load_batch(column_of(tid), 0);  // in flight while the weights are made

    // Row r's weights by warp r % kWarps: lanes hold splits lane and lane + 32.
    const int lane = tid % 32;
#pragma unroll 1
    for (int r = tid / 32; r < num_rows; r += kWarps) {
      const int64_t row = row_of(r);
      const SplitWeights w =
          split_weights(args, row, split_rows, head_of(r), lane, args.num_splits);
      scratch.weights[r][lane] = w.w0;
      scratch.weights[r][lane + 32] = w.w1;
      if (lane == 0) {
        scratch.inv_denom[r] = w.denom > 0.0f ? 1.0f / w.denom : 0.0f;
        if (p.lse != nullptr) p.lse[row] = (w.total_max + __log2f(w.denom)) * kLn2;
      }
    }
    sync();

#pragma unroll 1
    for (int unit = tid; unit < units; unit += kThreads) {
      const float4* column = column_of(unit);
      const float* weights = scratch.weights[unit / kChunks];
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 1
      for (int s0 = 0; s0 < num_splits; s0 += kBatch) {
        if (s0 != 0 || unit != tid) load_batch(column, s0);  // else issued above
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          const float w = s0 + i < num_splits ? weights[s0 + i] : 0.0f;
          if (w != 0.0f) {
            acc.x += w * x[i].x, acc.y += w * x[i].y;
            acc.z += w * x[i].z, acc.w += w * x[i].w;
          }
        }
      }
      const float inv = scratch.inv_denom[unit / kChunks];
      *reinterpret_cast<float4*>(&scratch.out[unit / kChunks][unit % kChunks * 4]) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    }
    sync();

    // The epilogue: 4 consecutive elements per thread (write_output_quad), in whole warps (the
    // quads of a row are a multiple of 16, so a block's four lanes are active together).
    constexpr int kQuadsPerRow = kHeadDim / kOutputQuad;
    const int quads = num_rows * kQuadsPerRow;
#pragma unroll 1
    for (int warp_quad = tid - lane; warp_quad < quads; warp_quad += kThreads) {
      const int quad = min(warp_quad + lane, quads - 1);
      const int r = quad / kQuadsPerRow;
      const int d0 = quad % kQuadsPerRow * kOutputQuad;
      const float4 o = *reinterpret_cast<const float4*>(&scratch.out[r][d0]);
      const float v[kOutputQuad] = {o.x, o.y, o.z, o.w};
      write_output_quad(p, token_of(r), head_of(r), d0, v, warp_quad + lane < quads);
    }
  }
};

}  // namespace quench::decode
