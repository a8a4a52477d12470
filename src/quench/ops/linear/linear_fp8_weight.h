// A linear layer over an FP8 weight (linear_weight.h), bf16 activations in and out, on whichever
// kernel suits the token count (bench/LOG.md, thirty-second session, H100, 1B and 8B layers):
//  - few tokens stream the FP8 weight (linear_skinny.h: x stays bf16, exact fp32 products): the
//    layer is bound by its bytes, which FP8 halves (1.5-1.9x the bf16 kernel at one token);
//  - more tokens quantize x per token to e4m3 and run the FP8 GEMM (linear_fp8_cublaslt.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/core/dtype.h"
#include "quench/ops/linear/linear_fp8_cublaslt.h"
#include "quench/ops/linear/linear_weight.h"
#include "quench/ops/quantize/fp8_rows_out.h"

namespace quench {

// Device scratch for the activations' e4m3 copy and scales: padded tokens x in bytes and padded
// tokens x (in / fp8_activation_group) floats at the most (fp8_gemm_rows).
struct Fp8ActivationScratch {
  uint8_t* xq = nullptr;
  float* scales = nullptr;
  int64_t xq_bytes = 0;
  int64_t scale_count = 0;
};

// Whether a layer of `tokens` rows streams its FP8 weight: up to 2 tokens always; at 3 or 4 only
// a small weight (at most kFp8StreamMaxElementsFewTokens) that is not much wider than deep
// (out < 4 in). The streaming kernel's time grows with the tokens where the GEMM's does not
// (H100, bench/LOG.md thirty-sixth session: Llama-3-8B down 23.5 us streamed at 2 tokens and
// 51.1 at 4, the GEMM 29.1 with its quantization pass); at 4 tokens the GEMM won for every 8B
// layer (o 10.0 vs 16.5 us) and for the 1B down (12.9 vs 14.0), streaming for the 1B o (4.7 vs
// 5.9) and qkv (6.0 vs 6.3), whose weights are 4-6 Mi elements. In the 1B's decode step the
// rule gained 2.4% at 4 sequences and lost 0.8-1.8% at 3 (the GEMM costs ~2 us more in the step).
inline constexpr int64_t kFp8StreamMaxElementsFewTokens = int64_t{8} << 20;
bool linear_fp8_streams(int32_t tokens, int32_t in_features, int32_t out_features);

// The rows the GEMM path computes for `tokens` (in_features -> out_features): a multiple of
// kBlockGemmTokenMultiple where fp8_gemm_blockwise (the padding rows are zeros; their outputs land
// in `out` past `tokens`), else tokens.
int32_t fp8_gemm_rows(int32_t tokens, int32_t in_features, int32_t out_features,
                      const LinearWeight& w);

// Whether linear_fp8_weight_cuda takes the GEMM path for this layer and input x (else it streams
// the weight with x as bf16).
bool linear_fp8_takes_gemm(int32_t tokens, int32_t in_features, int32_t out_features,
                           const uint16_t* x, const LinearWeight& w);

// Where the GEMM path wants its activations quantized for `tokens` rows of `in_features` (the
// layer's out_features pick the kernels: fp8_gemm_blockwise): in
// `scratch`, per token (or per 128 columns, group-major, where fp8_gemm_blockwise), the rows
// padded to fp8_gemm_rows. Producers of the activations write there directly (rms_norm's and
// swiglu's FP8 outputs) instead of leaving them to linear_fp8_gemm_cuda's quantization pass. Throws
// quench::Error where the scratch is too small.
Fp8RowsOut fp8_gemm_input(int32_t tokens, int32_t in_features, int32_t out_features,
                          const LinearWeight& w, const Fp8ActivationScratch& scratch);

// The GEMM over activations already quantized into `scratch` as fp8_gemm_input lays them out;
// other arguments as linear_fp8_weight_cuda's below.
void linear_fp8_gemm_quantized_cuda(const Fp8Gemm& gemm, int32_t tokens, int32_t in_features,
                                    int32_t out_features, const LinearWeight& w,
                                    const Fp8ActivationScratch& scratch, void* out,
                                    int32_t out_rows, DType out_dtype, cudaStream_t stream);

// The GEMM path alone, whatever the token count: x quantized into `scratch` as fp8_gemm_input lays
// it out, then Fp8Gemm::run.
// Arguments as linear_fp8_weight_cuda's below.
void linear_fp8_gemm_cuda(const Fp8Gemm& gemm, int32_t tokens, int32_t in_features,
                          int32_t out_features, const uint16_t* x, const LinearWeight& w,
                          const Fp8ActivationScratch& scratch, void* out, int32_t out_rows,
                          DType out_dtype, cudaStream_t stream);

//   x: bf16 [tokens, in]; w: FP8 [out, in] (per-channel or 128 x 128 block scales on the GEMM
//   path); out: [out_rows, out] in out_dtype (bf16 or f32), out_rows >= fp8_gemm_rows(tokens, in,
//   out, w):
//   rows past `tokens` may be overwritten.
// Throws quench::Error naming what is not supported (shape, scratch or output too small, or a
// weight the GEMM cannot take for this many tokens).
void linear_fp8_weight_cuda(const Fp8Gemm& gemm, int32_t tokens, int32_t in_features,
                            int32_t out_features, const uint16_t* x, const LinearWeight& w,
                            const Fp8ActivationScratch& scratch, void* out, int32_t out_rows,
                            DType out_dtype, cudaStream_t stream);

}  // namespace quench
