// The weight-streaming kernel of linear_skinny.h and linear_skinny_fused.h: one warp owns an output
// feature at a time and reads its weight row with 16-byte loads, kUnroll in flight per lane; the
// CTAs stride over the features so that every SM streams. Two optional stages around the product:
//  - the input: x read from global memory (L1-cached: every warp reads all of it), or the
//    decoder's residual add + RMSNorm computed by each CTA into shared memory first (the norm's
//    own kernel and its launch gone from a one-token step; see linear_skinny_fused.h);
//  - the output: the product itself, or SwiGLU of two products (a warp owns the gate row n and
//    the up row n + out_features of a [2 * out_features, in] weight and writes silu(g) * u).
// The weight is bf16, or FP8 e4m3 with its scales (kFp8, linear_weight.h): half the bytes, each
// 16-byte load 16 weights, widened to fp32 exactly (e4m3 -> f16 -> f32) and multiplied by the
// bf16 x in fp32 as the bf16 path does; the scale joins per 16 weights (blocks) or once per
// output (tensor, channel).
#pragma once

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "quench/core/block_reduce.cuh"
#include "quench/core/dependent_launch.cuh"
#include "quench/core/env_switch.h"
#include "quench/numerics/bf16.h"
#include "quench/numerics/fp8.h"
#include "quench/numerics/half_pair.cuh"
#include "quench/ops/linear/linear_weight.h"
#include "quench/ops/rms_norm/rms_norm_vector.cuh"

namespace quench::skinny {

inline constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane and row

enum class Input { kGlobal, kResidualNorm };
enum class Output { kPlain, kSwiglu };

struct KernelArgs {
  int32_t in_features = 0;
  int32_t out_features = 0;     // outputs per token (SwiGLU: half the weight's rows)
  const uint16_t* x = nullptr;  // Input::kGlobal: bf16 [tokens, in]
  // Input::kResidualNorm: residual (+ delta) -> residual_out (CTA 0 writes it), RMSNorm'd with
  // norm_weight into shared memory.
  const uint16_t* residual = nullptr;
  const uint16_t* delta = nullptr;
  uint16_t* residual_out = nullptr;
  const uint16_t* norm_weight = nullptr;
  float eps = 1e-6f;
  const uint16_t* weight = nullptr;  // bf16 [rows, in]
  // kFp8: the weight as e4m3 [rows, in] and its scales (linear_weight.h); rows of SwiGLU's up
  // half are out_features + n, as in the scales' row index.
  const uint8_t* weight_fp8 = nullptr;
  const float* weight_scales = nullptr;
  WeightScaling scaling = WeightScaling::kTensor;
  int32_t block_out = 0, block_in = 0;
  void* out = nullptr;          // [tokens, out_features], bf16 or f32
  uint32_t prefetch_bytes = 0;  // of each warp's first weight row(s), into L2; 0: none
};

// acc += dot(w, x) over one vector of 8 bf16 each.
__device__ __forceinline__ float dot8(const uint4& w, const uint4& x, float acc) {
  acc = fmaf(bf16_pair_lo(w.x), bf16_pair_lo(x.x), acc);
  acc = fmaf(bf16_pair_hi(w.x), bf16_pair_hi(x.x), acc);
  acc = fmaf(bf16_pair_lo(w.y), bf16_pair_lo(x.y), acc);
  acc = fmaf(bf16_pair_hi(w.y), bf16_pair_hi(x.y), acc);
  acc = fmaf(bf16_pair_lo(w.z), bf16_pair_lo(x.z), acc);
  acc = fmaf(bf16_pair_hi(w.z), bf16_pair_hi(x.z), acc);
  acc = fmaf(bf16_pair_lo(w.w), bf16_pair_lo(x.w), acc);
  acc = fmaf(bf16_pair_hi(w.w), bf16_pair_hi(x.w), acc);
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

// The 16 e4m3 weights of one 16-byte vector widened to fp32 (exact): on sm_89+ one conversion
// per pair to f16, then to fp32.
__device__ __forceinline__ void widen_e4m3x16(const uint4& w, float (&out)[16]) {
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    uint32_t lo, hi;
    asm("{\n .reg .b16 lo16, hi16;\n mov.b32 {lo16, hi16}, %2;\n"
        " cvt.rn.f16x2.e4m3x2 %0, lo16;\n cvt.rn.f16x2.e4m3x2 %1, hi16;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(words[i]));
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
    out[4 * i] = a.x;
    out[4 * i + 1] = a.y;
    out[4 * i + 2] = b.x;
    out[4 * i + 3] = b.y;
#else
#pragma unroll
    for (int j = 0; j < 4; ++j)
      out[4 * i + j] = fp8_e4m3_to_float(static_cast<uint8_t>(words[i] >> (8 * j)));
#endif
  }
}

// sum_j w[j] * x[j] over 16 weights and the 16 bf16 of x0, x1 (in the bf16 path's order).
__device__ __forceinline__ float dot16(const float (&w)[16], const uint4& x0, const uint4& x1) {
  const uint32_t xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    acc = fmaf(w[2 * i], bf16_pair_lo(xs[i]), acc);
    acc = fmaf(w[2 * i + 1], bf16_pair_hi(xs[i]), acc);
  }
  return acc;
}

// Points `a` at the weight `w` (bf16, or FP8 with its scales).
inline void set_weight(KernelArgs& a, const LinearWeight& w) {
  if (w.fp8()) {
    a.weight_fp8 = static_cast<const uint8_t*>(w.data);
    a.weight_scales = w.scales;
    a.scaling = w.scaling;
    a.block_out = w.block_out;
    a.block_in = w.block_in;
  } else {
    a.weight = static_cast<const uint16_t*>(w.data);
  }
}

// The residual add and RMSNorm of rms_norm.h, computed the same way per element (the sum of
// squares in fp32 over the bf16-rounded sum, then bf16(v / sqrt(mean + eps) * weight)), for
// kTokens rows into `xs` (bf16 [kTokens, in], shared memory). CTA 0 writes the summed residual.
// The sum of squares is reduced in another order than rms_norm's kernel: results agree within
// an fp32 ulp before the bf16 rounding.
template <int kTokens, int kThreads>
__device__ __forceinline__ void stage_normed_rows(const KernelArgs& a, uint4* xs) {
  const int vectors = a.in_features / 8;
  const int tid = static_cast<int>(threadIdx.x);
  const bool writes_residual = blockIdx.x == 0 && a.delta != nullptr;
  const auto* residual = reinterpret_cast<const uint4*>(a.residual);
  const auto* delta = reinterpret_cast<const uint4*>(a.delta);
  auto* residual_out = reinterpret_cast<uint4*>(a.residual_out);
  float sum_squares[kTokens];
#pragma unroll
  for (int m = 0; m < kTokens; ++m) {
    sum_squares[m] = 0.0f;
    for (int v = tid; v < vectors; v += kThreads) {
      const int64_t at = static_cast<int64_t>(m) * vectors + v;
      uint4 r = __ldg(residual + at);
      if (delta != nullptr) {
        r = rms_norm_device::add_residual(r, __ldg(delta + at));
        if (writes_residual) residual_out[at] = r;
      }
      sum_squares[m] = rms_norm_device::add_squares(r, sum_squares[m]);
      xs[at] = r;
    }
  }
  const auto* norm_weight = reinterpret_cast<const uint4*>(a.norm_weight);
#pragma unroll
  for (int m = 0; m < kTokens; ++m) {
    const float denominator =
        sqrtf(cta::block_sum<kThreads>(sum_squares[m]) / static_cast<float>(a.in_features) + a.eps);
    // Each thread rescales the vectors it wrote above: no barrier between the two passes.
    for (int v = tid; v < vectors; v += kThreads) {
      const int64_t at = static_cast<int64_t>(m) * vectors + v;
      xs[at] = rms_norm_device::normalise(xs[at], __ldg(norm_weight + v), denominator);
    }
  }
  __syncthreads();
}

// Lane's kUnroll 16-byte vectors v0, v0 + 32, ... of each of kRows weight rows, all loads issued
// before any is used (zeros past `vectors`).
template <int kRows>
__device__ __forceinline__ void load_row_vectors(const uint4* const (&wrow)[kRows], int v0,
                                                 int vectors, uint4 (&w)[kRows][kUnroll]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + 32 * u;
      w[r][u] = v < vectors ? load_streaming(wrow[r] + v) : make_uint4(0, 0, 0, 0);
    }
  }
}

// Each lane's partial sums summed over the warp (every lane gets the total).
template <int kRows, int kTokens>
__device__ __forceinline__ void warp_sum(float (&acc)[kRows][kTokens]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int m = 0; m < kTokens; ++m) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], offset);
    }
  }
}

// The sums of kRows weight rows (row n, and row n + out_features for SwiGLU) with kTokens rows of
// x: acc[r][m].
template <int kTokens, int kRows, bool kSharedX>
__device__ __forceinline__ void dot_rows(const uint4* const (&wrow)[kRows], const uint4* xv,
                                         int vectors, int lane, float (&acc)[kRows][kTokens]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int m = 0; m < kTokens; ++m)
      acc[r][m] = 0.0f;
  }
  for (int v0 = lane; v0 < vectors; v0 += 32 * kUnroll) {
    uint4 w[kRows][kUnroll];
    load_row_vectors<kRows>(wrow, v0, vectors, w);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + 32 * u;
      if (v >= vectors) break;
#pragma unroll
      for (int m = 0; m < kTokens; ++m) {
        const int64_t at = static_cast<int64_t>(m) * vectors + v;
        const uint4 x = kSharedX ? xv[at] : __ldg(xv + at);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          acc[r][m] = dot8(w[r][u], x, acc[r][m]);
      }
    }
  }
  warp_sum<kRows, kTokens>(acc);
}

// dot_rows over an FP8 weight: rows[r] is the weight row of acc[r] (its index in the scales).
// Each lane takes 16-weight vectors v = lane, lane + 32, ... (kUnroll loads in flight); x's two
// 8-element vectors 2v, 2v + 1 go with vector v. Block scales join each vector's partial sums;
// tensor and channel scales multiply the warp's sums at the end.
template <int kTokens, int kRows, bool kSharedX>
__device__ __forceinline__ void dot_rows_fp8(const KernelArgs& a, const int64_t (&rows)[kRows],
                                             const uint4* xv, int lane,
                                             float (&acc)[kRows][kTokens]) {
  const int x_vectors = a.in_features / 8;
  const int vectors = a.in_features / 16;
  const bool blocks = a.scaling == WeightScaling::kBlock;
  // Blocks: each row's run of scales, one per block_in columns (a power of two: a shift per
  // vector, the row's division once).
  const int block_in_shift = blocks ? __ffs(a.block_in) - 1 : 0;
  const uint4* wrow[kRows];
  const float* row_scales[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    wrow[r] = reinterpret_cast<const uint4*>(a.weight_fp8 + rows[r] * a.in_features);
    row_scales[r] =
        a.weight_scales + (blocks ? weight_scale_index(WeightScaling::kBlock, rows[r], 0,
                                                       a.in_features, a.block_out, a.block_in)
                                  : 0);
#pragma unroll
    for (int m = 0; m < kTokens; ++m)
      acc[r][m] = 0.0f;
  }
  for (int v0 = lane; v0 < vectors; v0 += 32 * kUnroll) {
    uint4 w[kRows][kUnroll];
    load_row_vectors<kRows>(wrow, v0, vectors, w);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + 32 * u;
      if (v >= vectors) break;
      float wf[kRows][16];
      float scale[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        widen_e4m3x16(w[r][u], wf[r]);
        scale[r] = blocks ? __ldg(row_scales[r] + ((16 * v) >> block_in_shift)) : 1.0f;
      }
#pragma unroll
      for (int m = 0; m < kTokens; ++m) {
        const int64_t at = static_cast<int64_t>(m) * x_vectors + 2 * v;
        const uint4 x0 = kSharedX ? xv[at] : __ldg(xv + at);
        const uint4 x1 = kSharedX ? xv[at + 1] : __ldg(xv + at + 1);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          acc[r][m] = fmaf(dot16(wf[r], x0, x1), scale[r], acc[r][m]);
      }
    }
  }
  warp_sum<kRows, kTokens>(acc);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    // Tensor and channel scales: once per output (row_scales[r] points at scales[0]).
    const float scale =
        blocks ? 1.0f : __ldg(row_scales[r] + (a.scaling == WeightScaling::kChannel ? rows[r] : 0));
#pragma unroll
    for (int m = 0; m < kTokens; ++m)
      acc[r][m] *= scale;
  }
}

// The bytes of its first weight row (each of them, for SwiGLU's two) that each warp asks L2 for
// when `first_rows` rows are first in all: under 12 MiB in all, a quarter of the H100's and
// H200's 50 MB L2, so that the lines it brings are still there when the warps read them.
// QUENCH_LINEAR_PREFETCH=0: none (an A/B switch).
inline uint32_t first_rows_prefetch_bytes(int64_t first_rows, int32_t in_features,
                                          int32_t weight_bytes = 2) {
  static const bool prefetch = env_switch("QUENCH_LINEAR_PREFETCH", {"1", "0"}) != "0";
  constexpr int64_t kBudgetBytes = int64_t{12} << 20;
  if (!prefetch || first_rows <= 0) return 0;
  return static_cast<uint32_t>(
      std::min(int64_t{in_features} * weight_bytes, kBudgetBytes / first_rows) / 16 * 16);
}

// One launch: Input::kResidualNorm needs kTokens * in_features * 2 bytes of dynamic shared memory.
template <int kTokens, bool kF32Out, Input kInput, Output kOutput, int kThreads, bool kFp8 = false>
__global__ void __launch_bounds__(kThreads) linear_skinny_kernel(KernelArgs a) {
  constexpr int kWarps = kThreads / 32;
  constexpr int kRows = kOutput == Output::kSwiglu ? 2 : 1;
  static_assert(!(kF32Out && kOutput == Output::kSwiglu), "SwiGLU writes bf16");
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int vectors = a.in_features / 8;
  const int64_t warp0 = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  constexpr int kWeightBytes = kFp8 ? 1 : 2;
  const auto* weight_bytes =
      kFp8 ? static_cast<const void*>(a.weight_fp8) : static_cast<const void*>(a.weight);
  // The first rows' weights start streaming into L2 before anything else (the norm's work too).
  if (lane == 0 && a.prefetch_bytes > 0 && warp0 < a.out_features) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      prefetch_l2_bulk(static_cast<const uint8_t*>(weight_bytes) +
                           (warp0 + r * int64_t{a.out_features}) * a.in_features * kWeightBytes,
                       a.prefetch_bytes);
  }
  extern __shared__ uint4 staged_x[];
  const uint4* xv = reinterpret_cast<const uint4*>(a.x);
  if constexpr (kInput == Input::kResidualNorm) {
    stage_normed_rows<kTokens, kThreads>(a, staged_x);
    xv = staged_x;
  }
  for (int64_t n = warp0; n < a.out_features; n += warps) {
    float acc[kRows][kTokens];
    if constexpr (kFp8) {
      int64_t rows[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        rows[r] = n + r * int64_t{a.out_features};
      dot_rows_fp8<kTokens, kRows, kInput == Input::kResidualNorm>(a, rows, xv, lane, acc);
    } else {
      const uint4* wrow[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        wrow[r] = reinterpret_cast<const uint4*>(a.weight +
                                                 (n + r * int64_t{a.out_features}) * a.in_features);
      dot_rows<kTokens, kRows, kInput == Input::kResidualNorm>(wrow, xv, vectors, lane, acc);
    }
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < kTokens; ++m) {
        const int64_t at = static_cast<int64_t>(m) * a.out_features + n;
        if constexpr (kOutput == Output::kSwiglu) {
          // As swiglu.h computes it from the bf16 gate_up row.
          const float g = bf16_bits_to_float(float_to_bf16_bits(acc[0][m]));
          const float u = bf16_bits_to_float(float_to_bf16_bits(acc[1][m]));
          static_cast<uint16_t*>(a.out)[at] = float_to_bf16_bits(g / (1.0f + expf(-g)) * u);
        } else if constexpr (kF32Out) {
          static_cast<float*>(a.out)[at] = acc[0][m];
        } else {
          static_cast<uint16_t*>(a.out)[at] = float_to_bf16_bits(acc[0][m]);
        }
      }
    }
  }
}

}  // namespace quench::skinny
