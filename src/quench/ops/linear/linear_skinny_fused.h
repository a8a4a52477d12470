// Decode-size linear layers with the decoder's neighbouring element-wise steps folded in, so that
// a one-token step launches three kernels fewer per layer:
//  - in front, the residual add + RMSNorm (rms_norm.h) that precedes qkv and gate_up: each CTA
//    computes the normalised rows into its shared memory (they are a few KB) while its first
//    weight rows stream into L2; CTA 0 writes the summed residual. The residual is written out
//    of place: every CTA reads the old one while CTA 0 writes the new one.
//  - behind, SwiGLU of gate_up: one warp owns gate row n and up row n + out_features, and writes
//    silu(bf16(g)) * bf16(u) in bf16, as swiglu.h computes it from the bf16 gate_up row.
// The results are those of the separate kernels (rms_norm's sum of squares is reduced in another
// order: within an fp32 ulp before the bf16 rounding).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/linear/linear_weight.h"

namespace quench {

// The residual add and RMSNorm in front of a linear layer:
//   residual_out = bf16(residual + delta)    (delta given)
//   x            = bf16(r / sqrt(mean(r^2) + eps) * weight),  r = residual_out or residual
struct SkinnyResidualNorm {
  const uint16_t* residual = nullptr;  // bf16 [tokens, in]
  const uint16_t* delta = nullptr;     // bf16 [tokens, in], or null: no add
  uint16_t* residual_out = nullptr;    // bf16 [tokens, in]; required with delta, aliasing neither
  const uint16_t* weight = nullptr;    // bf16 [in]
  float eps = 1e-6f;
};

// The normalised rows a CTA holds in shared memory: tokens * in_features bf16 up to this.
inline constexpr int64_t kSkinnyNormMaxStagedBytes = 48 * 1024;

// True when linear_skinny_norm_cuda takes tokens x in_features: 1 to kSkinnyLinearMaxTokens
// tokens, in_features a positive multiple of 8 and the rows within kSkinnyNormMaxStagedBytes.
bool linear_skinny_norm_supported(int32_t tokens, int32_t in_features);

// Whether the GPU decoder folds its norms and SwiGLU into the linear layers of a step of `tokens`
// rows of width `hidden`: where linear_cuda streams the weights (linear_prefers_skinny) and
// linear_skinny_norm_cuda takes the shape, unless QUENCH_LINEAR_FUSION=0 (an A/B switch).
bool linear_norm_fusion_applies(int32_t tokens, int32_t hidden);

//   swiglu false: out [tokens, out_features] = x · weightᵀ, weight [out_features, in]
//   swiglu true:  out [tokens, out_features] = silu(x · gateᵀ) * (x · upᵀ), weight
//                 [2 * out_features, in] (gate rows, then up rows: the gate_up layout)
// with x from `norm`; out bf16. All pointers 16-byte aligned. Throws quench::Error naming what is
// not supported.
void linear_skinny_norm_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                             const SkinnyResidualNorm& norm, const uint16_t* weight, bool swiglu,
                             uint16_t* out, cudaStream_t stream);
// The same over a bf16 or FP8 weight (linear_weight.h; FP8 needs in_features a multiple of 16).
void linear_skinny_norm_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                             const SkinnyResidualNorm& norm, const LinearWeight& weight,
                             bool swiglu, uint16_t* out, cudaStream_t stream);

}  // namespace quench
