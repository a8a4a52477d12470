#include "quench/ops/linear/linear_skinny.h"

#include <algorithm>

#include "quench/core/cuda_device.h"
#include "quench/core/dependent_launch.cuh"
#include "quench/core/device_buffer.h"
#include "quench/core/env_switch.h"
#include "quench/core/error.h"
#include "quench/numerics/bf16.h"

namespace quench {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

__device__ __forceinline__ float bf16_lo(uint32_t pair) {
  return __uint_as_float(pair << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t pair) {
  return __uint_as_float(pair & 0xffff0000u);
}

// acc += dot(w, x) over one vector of 8 bf16 each.
__device__ __forceinline__ float dot8(const uint4& w, const uint4& x, float acc) {
  acc = fmaf(bf16_lo(w.x), bf16_lo(x.x), acc);
  acc = fmaf(bf16_hi(w.x), bf16_hi(x.x), acc);
  acc = fmaf(bf16_lo(w.y), bf16_lo(x.y), acc);
  acc = fmaf(bf16_hi(w.y), bf16_hi(x.y), acc);
  acc = fmaf(bf16_lo(w.z), bf16_lo(x.z), acc);
  acc = fmaf(bf16_hi(w.z), bf16_hi(x.z), acc);
  acc = fmaf(bf16_lo(w.w), bf16_lo(x.w), acc);
  acc = fmaf(bf16_hi(w.w), bf16_hi(x.w), acc);
  return acc;
}

// The weight is read once per call: loads that do not allocate in L1 (x, read by every warp,
// stays cached there).
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// prefetch_bytes: how much of its first weight row each warp asks L2 for before anything else
// (a multiple of 16; 0: none): one request puts the whole row in flight, where the loop below
// keeps four 16-byte loads per lane.
template <int kTokens, bool kF32Out>
__global__ void __launch_bounds__(kThreads)
    linear_skinny_kernel(int32_t in_features, int32_t out_features, const uint16_t* __restrict__ x,
                         const uint16_t* __restrict__ weight, void* __restrict__ out,
                         uint32_t prefetch_bytes) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int vectors = in_features / 8;  // 16-byte vectors per row
  const int64_t warp0 = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  if (lane == 0 && prefetch_bytes > 0 && warp0 < out_features)
    prefetch_l2_bulk(weight + warp0 * in_features, prefetch_bytes);
  const auto* xv = reinterpret_cast<const uint4*>(x);
  for (int64_t n = warp0; n < out_features; n += warps) {
    const auto* wrow = reinterpret_cast<const uint4*>(weight + n * in_features);
    float acc[kTokens];
#pragma unroll
    for (int m = 0; m < kTokens; ++m)
      acc[m] = 0.0f;
    for (int v0 = lane; v0 < vectors; v0 += 32 * kUnroll) {
      uint4 w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int v = v0 + 32 * u;
        w[u] = v < vectors ? load_streaming(wrow + v) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int v = v0 + 32 * u;
        if (v >= vectors) break;
#pragma unroll
        for (int m = 0; m < kTokens; ++m)
          acc[m] = dot8(w[u], __ldg(xv + static_cast<int64_t>(m) * vectors + v), acc[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < kTokens; ++m) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], offset);
    }
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < kTokens; ++m) {
        const int64_t at = static_cast<int64_t>(m) * out_features + n;
        if constexpr (kF32Out) {
          static_cast<float*>(out)[at] = acc[m];
        } else {
          static_cast<uint16_t*>(out)[at] = float_to_bf16_bits(acc[m]);
        }
      }
    }
  }
}

// The first rows' prefetch stays under this many bytes in all: a quarter of the H100's and H200's
// 50 MB L2, so that the lines it brings are still there when the warps read them.
constexpr int64_t kPrefetchBudgetBytes = int64_t{12} << 20;

template <int kTokens>
void launch(int32_t in, int32_t out_features, const uint16_t* x, const uint16_t* weight, void* out,
            DType out_dtype, cudaStream_t stream) {
  const int32_t sms = require_current_cuda_device_properties("linear_skinny").sm_count;
  // One feature per warp where the features are few; at most 8 CTAs per SM (2048 threads), each
  // warp striding over the rest.
  const int64_t needed = (static_cast<int64_t>(out_features) + kWarps - 1) / kWarps;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(needed, int64_t{sms} * 8));
  const int64_t first_rows = std::min<int64_t>(out_features, int64_t{blocks} * kWarps);
  const int64_t row_bytes = int64_t{in} * 2;
  // QUENCH_LINEAR_PREFETCH=0: no prefetch (an A/B switch).
  static const bool prefetch = env_switch("QUENCH_LINEAR_PREFETCH", {"0", "1"}) != "0";
  const auto prefetch_bytes = static_cast<uint32_t>(
      prefetch ? std::min(row_bytes, kPrefetchBudgetBytes / first_rows) / 16 * 16 : 0);
  const auto kernel = out_dtype == DType::kF32 ? linear_skinny_kernel<kTokens, true>
                                               : linear_skinny_kernel<kTokens, false>;
  kernel<<<blocks, kThreads, 0, stream>>>(in, out_features, x, weight, out, prefetch_bytes);
  check_cuda(cudaGetLastError(), "linear_skinny launch");
}

}  // namespace

bool linear_skinny_supported(int32_t tokens, int32_t in_features, const void* x,
                             const void* weight) {
  return tokens >= 1 && tokens <= kSkinnyLinearMaxTokens && in_features >= 8 &&
         in_features % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(weight) % 16 == 0;
}

void linear_skinny_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                        const uint16_t* x, const uint16_t* weight, void* out, DType out_dtype,
                        cudaStream_t stream) {
  QUENCH_REQUIRE(linear_skinny_supported(tokens, in_features, x, weight), "linear_skinny: ", tokens,
                 " tokens x ", in_features, " inputs is not supported; allowed: 1 to ",
                 kSkinnyLinearMaxTokens,
                 " tokens, inputs a multiple of 8, x and weight 16-byte aligned");
  QUENCH_REQUIRE(out_features >= 1, "linear_skinny: out_features ", out_features,
                 " is invalid; allowed: >= 1");
  QUENCH_REQUIRE(out_dtype == DType::kBF16 || out_dtype == DType::kF32,
                 "linear_skinny output dtype ", dtype_name(out_dtype),
                 " is not supported; allowed: bf16, f32");
  using Launch =
      void (*)(int32_t, int32_t, const uint16_t*, const uint16_t*, void*, DType, cudaStream_t);
  static constexpr Launch kLaunch[kSkinnyLinearMaxTokens] = {
      launch<1>, launch<2>, launch<3>, launch<4>, launch<5>, launch<6>, launch<7>, launch<8>};
  kLaunch[tokens - 1](in_features, out_features, x, weight, out, out_dtype, stream);
}

}  // namespace quench
