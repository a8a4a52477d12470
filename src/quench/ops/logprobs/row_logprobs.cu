#include "quench/ops/logprobs/row_logprobs.h"

#include <cooperative_groups.h>

#include <climits>
#include <cmath>

#include "quench/core/cluster_launch.cuh"
#include "quench/core/cuda_device.h"
#include "quench/core/error.h"
#include "quench/ops/logprobs/row_logprobs_scan.cuh"

namespace quench {
namespace {

using namespace row_logprobs_detail;

__device__ __forceinline__ const float* row_of(const RowLogprobsArgs& a, int64_t r) {
  return a.row_logits != nullptr ? a.row_logits[r]
                                 : a.logits + static_cast<int64_t>(a.rows[r]) * a.vocab;
}

// Row r's token's log-probability from the row's softmax sum (NaN without a softmax or for a
// token outside the vocabulary); returns log Z.
__device__ __forceinline__ double write_token_logprob(const RowLogprobsArgs& a, int64_t r,
                                                      const float* row, SoftmaxSum z) {
  const double log_z = static_cast<double>(z.m) + log(static_cast<double>(z.s));
  const int32_t token = a.tokens[a.token_index != nullptr ? a.token_index[r] : r];
  a.logprob[r] =
      z.finite && token >= 0 && token < a.vocab ? static_cast<float>(row[token] - log_z) : NAN;
  return log_z;
}

// Row r's top entries (best first) out of `best_v` / `best_i`, by threads k < top.
__device__ __forceinline__ void write_top(const RowLogprobsArgs& a, int64_t r, const float* best_v,
                                          const int32_t* best_i, bool row_finite, double log_z) {
  const int k = static_cast<int>(threadIdx.x);
  if (k < a.top) {
    const int64_t o = r * a.top + k;
    a.top_ids[o] = row_finite ? best_i[k] : -1;
    a.top_logprobs[o] = row_finite ? static_cast<float>(best_v[k] - log_z) : NAN;
  }
}

// One CTA per row (ColumnScan over the whole row); thread 0 joins the warps' sums. One pass (many
// rows): warp 0 merges the warps' full lists by rounds of a warp argmax over their heads. Two
// passes (few rows, ColumnScan::two_passes): the few real entries of the warps' lists are ranked
// (rank_select). Launch bounds: the one-pass kernel keeps two CTAs per SM (32 registers), which
// many rows need to stream at the argmax's speed (512 rows x 128256 top 5: 123-128 us with two
// CTAs per SM, 160 us with one, H100); the two-pass kernel, for few rows, takes the registers it
// wants instead (no spills).
template <bool kTwoPasses>
__global__ void __launch_bounds__(kThreads, kTwoPasses ? 1 : 2)
    row_logprobs_kernel(RowLogprobsArgs a) {
  const int r = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const float* row = row_of(a, r);
  __shared__ WarpSums sums;
  __shared__ double log_z;
  __shared__ int row_finite;
  ColumnScan scan(row, 0, a.vocab, a.top);
  if constexpr (kTwoPasses) {
    __shared__ Candidates candidates;
    __shared__ float best_v[kTop];
    __shared__ int32_t best_i[kTop];
    two_pass_scan(scan, sums, candidates, best_v, best_i);
    if (tid == 0) {
      const SoftmaxSum z = join_sums(sums.m, sums.s, sums.finite, kWarps);
      row_finite = z.finite;
      log_z = write_token_logprob(a, r, row, z);
    }
    rank_select(candidates.v, candidates.id, candidates.count, a.top, best_v, best_i);
    __syncthreads();
    write_top(a, r, best_v, best_i, row_finite != 0, log_z);
  } else {
    scan.pass(true, a.top > 0, -INFINITY);
    __shared__ float top_v[kWarps][kTop];
    __shared__ int32_t top_i[kWarps][kTop];
    write_warp_sums(scan, sums);
    if (lane < a.top) {
      top_v[tid / 32][lane] = scan.list_v;
      top_i[tid / 32][lane] = scan.list_i;
    }
    __syncthreads();
    if (tid == 0) {
      const SoftmaxSum z = join_sums(sums.m, sums.s, sums.finite, kWarps);
      row_finite = z.finite;
      log_z = write_token_logprob(a, r, row, z);
    }
    __syncthreads();
    if (tid >= 32) return;
    // The warps' lists merged: lane w < kWarps holds list w's next entry.
    int next = 0;
    for (int k = 0; k < a.top; ++k) {
      const bool has = lane < kWarps && next < a.top;
      float v = has ? top_v[lane][next] : -INFINITY;
      int32_t id = has ? top_i[lane][next] : INT_MAX;
      warp_best(v, id);
      if (has && top_i[lane][next] == id && top_v[lane][next] == v) ++next;
      if (lane == 0) {
        const int64_t o = static_cast<int64_t>(r) * a.top + k;
        a.top_ids[o] = row_finite ? id : -1;
        a.top_logprobs[o] = row_finite ? static_cast<float>(v - log_z) : NAN;
      }
    }
  }
}

// A cluster of kClusterCtas CTAs per row (sm_90), each scanning its own part of the columns in two
// passes (its bar its own: a part's top entries all reach it) and ranking its warps' candidates
// into one list (rank_select); CTA 0 gathers the parts' sums and lists through distributed shared
// memory and merges the sorted lists (merge_sorted_lists). One CTA per row is one SM's compute: a
// lone 128256-column row took 30-37 us there (two passes, H100), most of it the exponentials and
// the vote of 125 columns per thread.
constexpr int kClusterCtas = 8;

__global__ void __launch_bounds__(kThreads, 1) row_logprobs_cluster_kernel(RowLogprobsArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const auto part = static_cast<int32_t>(cluster.block_rank());
  const int64_t r = blockIdx.x / kClusterCtas;
  const int tid = static_cast<int>(threadIdx.x);
  const float* row = row_of(a, r);
  // Parts in whole 32-column groups, so that each warp's loads stay aligned.
  const int32_t span = ((a.vocab + kClusterCtas - 1) / kClusterCtas + 31) / 32 * 32;
  const int32_t begin = min(a.vocab, part * span), end = min(a.vocab, begin + span);
  __shared__ WarpSums sums;
  __shared__ Candidates candidates;
  // This part's sums and ranked list, which CTA 0 reads.
  __shared__ float part_m, part_s;
  __shared__ int part_finite;
  __shared__ float part_v[kTop];
  __shared__ int32_t part_i[kTop];
  ColumnScan scan(row, begin, end, a.top);
  two_pass_scan(scan, sums, candidates, part_v, part_i);
  if (tid == 0) {
    const SoftmaxSum z = join_sums(sums.m, sums.s, sums.finite, kWarps);
    part_m = z.m;
    part_s = z.s;
    part_finite = z.finite;
  }
  rank_select(candidates.v, candidates.id, candidates.count, a.top, part_v, part_i);
  cluster.sync();  // every part's results written and visible to CTA 0
  if (part == 0) {
    __shared__ float all_m[kClusterCtas], all_s[kClusterCtas];
    __shared__ int all_finite[kClusterCtas];
    __shared__ float all_v[kClusterCtas][kTop], row_v[kTop];
    __shared__ int32_t all_i[kClusterCtas][kTop], row_i[kTop];
    __shared__ double log_z;
    __shared__ int row_finite;
    for (int t = tid; t < kClusterCtas * kTop; t += kThreads) {
      const int q = t / kTop, j = t % kTop;
      all_v[q][j] = *cluster.map_shared_rank(&part_v[j], q);
      all_i[q][j] = *cluster.map_shared_rank(&part_i[j], q);
    }
    if (tid < kClusterCtas) {
      all_m[tid] = *cluster.map_shared_rank(&part_m, tid);
      all_s[tid] = *cluster.map_shared_rank(&part_s, tid);
      all_finite[tid] = *cluster.map_shared_rank(&part_finite, tid);
    }
    if (tid < kTop) {
      row_v[tid] = -INFINITY;
      row_i[tid] = INT_MAX;
    }
    __syncthreads();
    if (tid == 0) {
      const SoftmaxSum z = join_sums(all_m, all_s, all_finite, kClusterCtas);
      row_finite = z.finite;
      log_z = write_token_logprob(a, r, row, z);
    }
    merge_sorted_lists(&all_v[0][0], &all_i[0][0], kClusterCtas, a.top, row_v, row_i);
    __syncthreads();
    write_top(a, r, row_v, row_i, row_finite != 0, log_z);
  }
  // The other CTAs' shared memory must outlive CTA 0's reads of it.
  cluster.sync();
#else
  __trap();  // launched only on sm_90 (row_logprobs_cuda)
#endif
}

}  // namespace

void row_logprobs_cuda(const RowLogprobsArgs& a, cudaStream_t stream) {
  QUENCH_REQUIRE(a.n >= 0 && a.vocab >= 1, "row logprobs: n ", a.n, " and vocab ", a.vocab,
                 " must be >= 0 and >= 1");
  QUENCH_REQUIRE(a.top >= 0 && a.top <= kMaxTopLogprobs && a.top <= a.vocab, "row logprobs: top ",
                 a.top, " must be in [0, min(", kMaxTopLogprobs, ", vocab ", a.vocab, ")]");
  if (a.n == 0) return;
  QUENCH_REQUIRE((a.row_logits != nullptr || (a.logits != nullptr && a.rows != nullptr)) &&
                     a.tokens != nullptr && a.logprob != nullptr &&
                     (a.top == 0 || (a.top_ids != nullptr && a.top_logprobs != nullptr)),
                 "row logprobs: a device array is null");
  const CudaDeviceProperties gpu = require_current_cuda_device_properties("row logprobs");
  const bool hopper = runs_cluster_kernels(gpu);
  const bool few = a.n <= kRowLogprobsFewRows;
  QUENCH_REQUIRE(a.kernel != RowLogprobsKernel::kClusterPerRow || hopper,
                 "row logprobs: the cluster kernel needs an sm_90 GPU; this one is sm_",
                 gpu.compute_capability_major, gpu.compute_capability_minor);
  const bool cluster = a.kernel == RowLogprobsKernel::kClusterPerRow ||
                       (a.kernel == RowLogprobsKernel::kAuto && hopper &&
                        a.n <= kRowLogprobsClusterRows && a.vocab >= kRowLogprobsClusterMinColumns);
  if (cluster) {
    launch_in_clusters("row logprobs", row_logprobs_cluster_kernel,
                       static_cast<unsigned>(a.n) * kClusterCtas, kThreads, kClusterCtas, stream,
                       a);
  } else if (few && a.top > 0) {
    row_logprobs_kernel<true><<<static_cast<unsigned>(a.n), kThreads, 0, stream>>>(a);
  } else {
    row_logprobs_kernel<false><<<static_cast<unsigned>(a.n), kThreads, 0, stream>>>(a);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "row logprobs launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
