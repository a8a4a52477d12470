// Linear layers of a few tokens (decode steps): out = x · weightᵀ streamed at the weights' read
// bandwidth. With one to eight rows of x the product is a matrix-vector product bound by reading
// the weight once; cuBLAS's GEMM tiles split the work over the output features only, which for a
// layer of few outputs and many inputs (Llama's down projection: 2048 outputs, 8192 inputs)
// leaves most SMs idle. Here one warp owns an output feature at a time and reads its weight row
// with 16-byte loads, four in flight per lane; every CTA strides over the features, so all SMs
// stream. fp32 accumulation (each lane's partial sums, then the warp's), output bf16 or fp32.
// Each warp first asks L2 for its first weight row in one bulk prefetch (sm_90+; at most 12 MiB
// per call): 2-11% faster per layer on the H100 (bench/LOG.md, twenty-fifth session).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/core/dtype.h"
#include "quench/ops/linear/linear_weight.h"

namespace quench {

inline constexpr int32_t kSkinnyLinearMaxTokens = 8;

// True when linear_skinny_cuda takes the shape: 1 to kSkinnyLinearMaxTokens tokens, in_features a
// multiple of 8 (whole 16-byte vectors) and x, weight 16-byte aligned.
bool linear_skinny_supported(int32_t tokens, int32_t in_features, const void* x,
                             const void* weight);

//   x: bf16 [tokens, in]; weight: bf16 [out, in]; out: [tokens, out] in out_dtype (bf16 or f32).
// Throws quench::Error when the shape is not supported (see above).
void linear_skinny_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                        const uint16_t* x, const uint16_t* weight, void* out, DType out_dtype,
                        cudaStream_t stream);

// The same over a bf16 or FP8 weight (linear_weight.h); FP8 needs in_features a multiple of 16.
// Its results are linear_fp8_weight_reference's, summed in another order.
bool linear_skinny_supported(int32_t tokens, int32_t in_features, const void* x,
                             const LinearWeight& weight);
void linear_skinny_cuda(int32_t tokens, int32_t in_features, int32_t out_features,
                        const uint16_t* x, const LinearWeight& weight, void* out, DType out_dtype,
                        cudaStream_t stream);

}  // namespace quench
