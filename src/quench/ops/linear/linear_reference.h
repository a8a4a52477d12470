// CPU reference of a bias-free linear layer, as HF's nn.Linear stores it:
//   out[t][n] = sum_k x[t][k] * weight[n][k]
// x and weight are bf16 widened to fp32, the sum accumulates in fp32 in index order k = 0, 1, ...,
// and out is fp32 (callers round it to the activation dtype where the model does).
#pragma once

#include <cstdint>

namespace quench {

//   x:      fp32 [num_tokens, in_features], row-major.
//   weight: bf16 bits [out_features, in_features], row-major (HF layout).
//   out:    fp32 [num_tokens, out_features]; must not alias x.
// Throws quench::Error for non-positive feature counts, a negative token count or null pointers.
void linear_reference(int32_t num_tokens, int32_t in_features, int32_t out_features, const float* x,
                      const uint16_t* weight, float* out);

// The argument checks of linear_reference, shared by every CPU implementation of its contract
// (linear_cpu.h): throws quench::Error naming the bad size or the null pointer.
void check_linear_args(int32_t num_tokens, int32_t in_features, int32_t out_features,
                       const float* x, const uint16_t* weight, const float* out);

}  // namespace quench
