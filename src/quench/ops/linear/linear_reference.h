// CPU reference of a bias-free linear layer, as HF's nn.Linear stores it:
//   out[t][n] = sum_k x[t][k] * weight[n][k]
// x and weight are bf16 widened to fp32, the sum accumulates in fp32 in index order k = 0, 1, ...,
// and out is fp32 (callers round it to the activation dtype where the model does).
#pragma once

#include <cstdint>

#include "quench/ops/linear/linear_weight.h"

namespace quench {

//   x:      fp32 [num_tokens, in_features], row-major.
//   weight: bf16 bits [out_features, in_features], row-major (HF layout).
//   out:    fp32 [num_tokens, out_features]; must not alias x.
// Throws quench::Error for non-positive feature counts, a negative token count or null pointers.
void linear_reference(int32_t num_tokens, int32_t in_features, int32_t out_features, const float* x,
                      const uint16_t* weight, float* out);

// The same over an FP8 e4m3 weight with its scales (LinearWeight's meaning, host pointers): each
// weight element widened to fp32 as fp8 x scale (one fp32 rounding), then summed as above.
//   weight: e4m3 bytes [out_features, in_features]; scales: weight_scale_count of them.
void linear_fp8_weight_reference(int32_t num_tokens, int32_t in_features, int32_t out_features,
                                 const float* x, const uint8_t* weight, const float* scales,
                                 WeightScaling scaling, int32_t block_out, int32_t block_in,
                                 float* out);

// The argument checks of linear_reference, shared by every CPU implementation of its contract
// (linear_cpu.h): throws quench::Error naming the bad size or the null pointer.
void check_linear_args(int32_t num_tokens, int32_t in_features, int32_t out_features,
                       const float* x, const uint16_t* weight, const float* out);

}  // namespace quench
