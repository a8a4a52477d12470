// Split-KV merge through distributed shared memory (sm_90 thread-block clusters;
// DecodeKernelArgs::cluster_merge): the num_splits CTAs of one work item (request, KV head, row
// group) are launched as one cluster. Each keeps its partial rows in its own shared memory, where
// its combine step already is; after one cluster barrier, CTA `rank` merges rows rank, rank +
// num_splits, ... reading every split's row straight from its peers' shared memory, and a second
// barrier keeps each CTA resident until its peers are done reading it.
//
// Why: the other merge places pay for a round trip through global memory and a hand-off between
// CTAs that do not know of each other: the merge kernel waits for the whole main grid to complete
// (and is a second launch), the last split CTA pays a GPU-scope fence and an atomic per CTA and
// merges every row alone. Here the splits meet at a barrier of their own cluster, the partials
// never leave the SMs, and the rows are merged in parallel by the cluster's CTAs.
//
// Where the partials are (the combine buffer, [kWarps][kRowsPerCta][combine_stride] floats):
// row r's normalised, v-scaled partial O in warp 0's slot of row r, its log2-sum-exp (scores in
// log2 units; -inf when the split saw no token) in column 0 of warp 1's slot. In write_rows each
// of those floats is read (as a warp's O) and then overwritten by the same thread, so the
// in-place write needs no barrier; nothing else reads them before the merge.
#pragma once

#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>

#include "quench/numerics/fast_math.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"
#include "quench/ops/attention/decode/decode_output.cuh"

namespace quench::decode {

// Where split partials sit in a CTA's combine buffer (see above).
template <int kCombineStride>
struct ClusterPartials {
  static __device__ __forceinline__ float* o_row(float* combine, int r) {
    return combine + r * kCombineStride;
  }
  static __device__ __forceinline__ float* lse(float* combine, int r) {
    return combine + (kRowsPerCta + r) * kCombineStride;
  }
};

// Run by the kThreads compute threads of every CTA of the cluster (tid 0..kThreads-1; the TMA
// kernel's producer warp has exited). `rank` is the CTA's split (its rank in the cluster);
// `combine` its own combine buffer, holding its partials. Row r is query token q_begin + (row0 +
// r) / group, q head head_base + (row0 + r) % group. The cluster barrier counts the threads that
// have not exited, so the producer warps are not waited for.
template <int kHeadDim, int kCombineStride>
__device__ __noinline__ void merge_rows_in_cluster(const AttentionParams& p, float* combine,
                                                   int num_splits, int rank, int32_t q_begin,
                                                   int32_t row0, int32_t group, int32_t head_base,
                                                   int32_t num_rows, int tid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using Partials = ClusterPartials<kCombineStride>;
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr float kLn2 = 0.6931471805599453f;
  constexpr int kQuadsPerRow = kHeadDim / kOutputQuad;
  // Splits whose O chunks one thread has in flight at once (16-byte loads).
  constexpr int kBatch = 8;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every split's partials are in its shared memory, visible cluster-wide

  const int lane = tid % 32;
  const int my_rows = rank < num_rows ? (num_rows - 1 - rank) / num_splits + 1 : 0;
  const int quads = my_rows * kQuadsPerRow;
  // Whole warps, as write_output_quad needs (a row's quads are a multiple of 16).
#pragma unroll 1
  for (int warp_quad = tid - lane; warp_quad < quads; warp_quad += kThreads) {
    const bool active = warp_quad + lane < quads;
    const int quad = active ? warp_quad + lane : quads - 1;
    const int r = rank + quad / kQuadsPerRow * num_splits;
    const int d0 = quad % kQuadsPerRow * kOutputQuad;
    const int32_t token = q_begin + (row0 + r) / group;
    const int32_t head = head_base + (row0 + r) % group;
    float lse[kMaxClusterSplits];
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s)
      lse[s] = s < num_splits ? *cluster.map_shared_rank(Partials::lse(combine, r), s) : -INFINITY;
    float max_lse = -INFINITY;
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s)
      max_lse = fmaxf(max_lse, lse[s]);
    const float sink = p.sinks != nullptr ? p.sinks[head] * kLog2e : -INFINITY;
    const float total_max = fmaxf(max_lse, sink);
    float denom = 0.0f;
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      lse[s] = lse[s] == -INFINITY ? 0.0f : fast_exp2(lse[s] - total_max);  // now the weight
      denom += lse[s];
    }
    if (p.sinks != nullptr) denom += fast_exp2(sink - total_max);
    // Splits in ascending order, as the other merges sum them; a split that saw no token has an
    // unwritten O chunk, which its zero weight keeps out (0 x NaN would not).
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s0 = 0; s0 < kMaxClusterSplits; s0 += kBatch) {
      if (s0 >= num_splits) break;
      float4 x[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        x[i] = s0 + i < num_splits ? *reinterpret_cast<const float4*>(cluster.map_shared_rank(
                                         Partials::o_row(combine, r) + d0, s0 + i))
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const float w = lse[s0 + i];
        if (s0 + i < num_splits && w != 0.0f) {
          acc.x += w * x[i].x, acc.y += w * x[i].y;
          acc.z += w * x[i].z, acc.w += w * x[i].w;
        }
      }
    }
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
    const float v[kOutputQuad] = {acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv};
    write_output_quad(p, token, head, d0, v, active);
    if (active && d0 == 0 && p.lse != nullptr) {
      p.lse[static_cast<int64_t>(token) * p.num_q_heads + head] =
          (total_max + __log2f(denom)) * kLn2;
    }
  }
  cluster.sync();  // no CTA exits while a peer may still read its shared memory
#else
  __trap();  // launched as a cluster on sm_90 only (decode_attention.cu)
#endif
}

}  // namespace quench::decode
