// GPU RMSNorm over rows of bf16, the decoder's input and post-attention norms, with the residual
// add fused in front as the model runs them (model/decoder_model.h):
//   residual = bf16(residual + delta)          (when delta is given)
//   out      = bf16(residual / sqrt(mean(residual^2) + eps) * weight)
// fp32 math; the reference is qk_rms_norm_reference over one "head" of `width` per row (the
// kernel reduces in another order, so results agree within an ulp of fp32 before the rounding).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/quantize/fp8_rows_out.h"

namespace quench {

struct RmsNormParams {
  int32_t rows = 0;
  int32_t width = 0;                 // elements per row, <= 8192
  uint16_t* residual = nullptr;      // bf16 [rows, width]; updated in place when delta is given
  const uint16_t* delta = nullptr;   // bf16 [rows, width] or null (no add)
  const uint16_t* weight = nullptr;  // bf16 [width]
  float eps = 1e-6f;
  uint16_t* out = nullptr;  // bf16 [rows, width]; may not alias residual
};

// Launches on `stream`; throws quench::Error for bad sizes or null pointers. Graph-capturable.
void rms_norm_cuda(const RmsNormParams& p, cudaStream_t stream);

// The same rows also (or only: p.out may be null) written quantized for an FP8 GEMM (fp8), as
// quantize_fp8_dynamic_rows_cuda would from `out`, bit for bit; rows up to fp8.padded_rows(rows)
// (zeros, scale 1 past `rows`). Width a multiple of 8, the row pointers 16-byte aligned.
void rms_norm_cuda(const RmsNormParams& p, const Fp8RowsOut& fp8, cudaStream_t stream);

}  // namespace quench
