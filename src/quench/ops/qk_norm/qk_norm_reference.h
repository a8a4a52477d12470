// CPU reference of Qwen3's per-head RMSNorm of q and k (q_norm / k_norm), applied before RoPE.
//
// For every (token, head) row of head_dim elements:
//   y[d] = x[d] / sqrt(mean(x^2) + eps) * weight[d]
// with mean(x^2) accumulated in fp32 in index order, evaluated literally in that order
// (divide, then multiply by the weight). Kernels reduce in another order, so they match within
// an ulp or two of fp32 before their final rounding.
#pragma once

#include <cstdint>

namespace quench {

// Normalizes x in place.
//   x:      fp32 [num_tokens, num_heads, head_dim], dense row-major.
//   weight: bf16 bits [head_dim], shared by all heads (multiplies).
//   eps:    added to mean(x^2), > 0.
// Throws quench::Error for non-positive sizes or eps.
void qk_rms_norm_reference(int32_t num_tokens, int32_t num_heads, int32_t head_dim,
                           const uint16_t* weight, float eps, float* x);

}  // namespace quench
