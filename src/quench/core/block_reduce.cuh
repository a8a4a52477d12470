// CTA-wide reductions of one float per thread, returned to every thread: a shuffle reduction in
// each warp, then the warps' results in warp order (a fixed order: the same inputs give the same
// sum). Each ends with a barrier, so that consecutive calls may reuse their shared words; every
// thread of the CTA must call them.
#pragma once

namespace quench::cta {

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <int kThreads, class Op>
__device__ __forceinline__ float block_reduce(float value, float identity, Op op) {
  static_assert(kThreads % 32 == 0, "whole warps");
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  __shared__ float warp_values[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_values[threadIdx.x / 32] = value;
  __syncthreads();
  float total = identity;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w)
    total = op(total, warp_values[w]);
  __syncthreads();
  return total;
}

// The sum of `value` over the CTA's kThreads threads.
template <int kThreads>
__device__ __forceinline__ float block_sum(float value) {
  return block_reduce<kThreads>(value, 0.0f, Add{});
}

// The max of `value` over the CTA's kThreads threads (NaN ignored, as fmaxf does).
template <int kThreads>
__device__ __forceinline__ float block_max(float value) {
  return block_reduce<kThreads>(value, -INFINITY, Max{});
}

}  // namespace quench::cta
