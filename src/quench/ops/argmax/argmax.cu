#include "quench/ops/argmax/argmax.h"

#include <cooperative_groups.h>

#include "quench/core/cluster_launch.cuh"
#include "quench/core/cuda_device.h"
#include "quench/core/error.h"

namespace quench {
namespace {

constexpr int kThreads = 512;

// A candidate: its value, its column, and whether its part of the row was all finite.
struct Best {
  float value;
  int32_t column;
  bool finite;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  // The larger value; among equal values the lower column (the reference's first maximum).
  const bool take_b = b.value > a.value || (b.value == a.value && b.column < a.column);
  Best r = take_b ? b : a;
  r.finite = a.finite && b.finite;
  return r;
}

// The best of columns [begin, end) of `row` for this thread (strided by the CTA), then of the
// CTA: a warp and a block reduction. `cols` marks "no column yet".
__device__ Best cta_best(const float* row, int32_t begin, int32_t end, int32_t cols) {
  Best best{-INFINITY, cols, true};
  // Unrolled so that several loads are in flight per thread (the compares wait, the loads not).
#pragma unroll 8
  for (int32_t c = begin + static_cast<int32_t>(threadIdx.x); c < end; c += kThreads) {
    const float v = row[c];
    best.finite = best.finite && isfinite(v);
    if (v > best.value || best.column == cols) best = Best{v, c, best.finite};
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    Best other;
    other.value = __shfl_down_sync(0xffffffffu, best.value, offset);
    other.column = __shfl_down_sync(0xffffffffu, best.column, offset);
    other.finite = __shfl_down_sync(0xffffffffu, static_cast<int>(best.finite), offset) != 0;
    best = better(best, other);
  }
  __shared__ Best warps[kThreads / 32];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warps[warp] = best;
  __syncthreads();
  Best r = warps[0];
  for (int w = 1; w < kThreads / 32; ++w)
    r = better(r, warps[w]);
  return r;  // the same in every thread
}

// One CTA per row: strided coalesced reads, then a warp and a block reduction.
__global__ void argmax_rows_kernel(const float* values, int32_t cols, int32_t* out) {
  const float* row = values + static_cast<int64_t>(blockIdx.x) * cols;
  const Best r = cta_best(row, 0, cols, cols);
  if (threadIdx.x == 0) out[blockIdx.x] = r.finite ? r.column : -1;
}

// A cluster of kClusterCtas CTAs per row (sm_90), each over its own part of the columns, and
// the parts' bests joined by CTA 0 through distributed shared memory. One CTA per row spent 32 us
// on a 128256-column row on the H100 (a decode step's greedy token; ~250 dependent loads per
// thread), most of it load latency that more CTAs in flight hide.
constexpr int kClusterCtas = 8;

__global__ void argmax_rows_cluster_kernel(const float* values, int32_t cols, int32_t* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const auto part = static_cast<int32_t>(cluster.block_rank());
  const int64_t row_index = blockIdx.x / kClusterCtas;
  const int32_t chunk = (cols + kClusterCtas - 1) / kClusterCtas;
  const int32_t begin = min(cols, part * chunk), end = min(cols, begin + chunk);
  __shared__ Best part_best;
  const Best r = cta_best(values + row_index * cols, begin, end, cols);
  if (threadIdx.x == 0) part_best = r;
  cluster.sync();
  if (part == 0 && threadIdx.x == 0) {
    Best best = part_best;
    for (int p = 1; p < kClusterCtas; ++p)
      best = better(best, *cluster.map_shared_rank(&part_best, p));
    out[row_index] = best.finite ? best.column : -1;
  }
  // The other CTAs' shared memory must outlive CTA 0's reads of it.
  cluster.sync();
#else
  __trap();  // launched only on sm_90 (argmax_rows_cuda)
#endif
}

// Rows at least this wide take the cluster kernel where the GPU has clusters.
constexpr int32_t kClusterMinCols = 4096;

}  // namespace

void argmax_rows_cuda(const float* values, int32_t rows, int32_t cols, int32_t* out,
                      cudaStream_t stream) {
  QUENCH_REQUIRE(rows >= 0 && cols >= 1, "argmax rows ", rows, " cols ", cols, " out of range");
  QUENCH_REQUIRE(rows == 0 || (values != nullptr && out != nullptr),
                 "argmax values and out must not be null");
  if (rows == 0) return;
  const CudaDeviceProperties gpu = require_current_cuda_device_properties("argmax");
  const bool clusters = cols >= kClusterMinCols && runs_cluster_kernels(gpu);
  if (clusters) {
    launch_in_clusters("argmax", argmax_rows_cluster_kernel,
                       static_cast<unsigned>(rows) * kClusterCtas, kThreads, kClusterCtas, stream,
                       values, cols, out);
  } else {
    argmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(values, cols, out);
  }
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "argmax launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
