#include "quench/ops/argmax/argmax.h"

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

// One CTA per row: strided coalesced reads, then a warp and a block reduction.
__global__ void argmax_rows_kernel(const float* values, int32_t cols, int32_t* out) {
  const float* row = values + static_cast<int64_t>(blockIdx.x) * cols;
  Best best{-INFINITY, cols, true};
  for (int32_t c = static_cast<int32_t>(threadIdx.x); c < cols; c += kThreads) {
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
  if (threadIdx.x == 0) {
    Best r = warps[0];
    for (int w = 1; w < kThreads / 32; ++w)
      r = better(r, warps[w]);
    out[blockIdx.x] = r.finite ? r.column : -1;
  }
}

}  // namespace

void argmax_rows_cuda(const float* values, int32_t rows, int32_t cols, int32_t* out,
                      cudaStream_t stream) {
  QUENCH_REQUIRE(rows >= 0 && cols >= 1, "argmax rows ", rows, " cols ", cols, " out of range");
  QUENCH_REQUIRE(rows == 0 || (values != nullptr && out != nullptr),
                 "argmax values and out must not be null");
  if (rows == 0) return;
  argmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(values, cols, out);
  const cudaError_t status = cudaGetLastError();
  QUENCH_REQUIRE(status == cudaSuccess, "argmax launch failed: ", cudaGetErrorString(status));
}

}  // namespace quench
