// FP8 e4m3 quantization of bf16 activation rows with scales computed from the data (dynamic):
// each row, or each group of `group` columns of a row, takes scale = amax / 448 (1 for an
// all-zero group) and stored = fp8(x / scale), the project's convention (SPEC §1.2). The input of
// an FP8 GEMM over FP8 weights (linear_fp8_cublaslt.h): per token for per-tensor and per-channel
// weights, per 128 columns for 128 x 128 block weights. Bit-exact with
// quantize_fp8_dynamic_rows_reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace quench {

// How the output rows and scales are laid out: the default is rows x groups row-major, nothing
// past `rows`; cuBLASLt's 128-column activation scales (VEC128) want the groups major and the
// token count a multiple of 8 (bench/LOG.md, thirty-second session).
struct Fp8DynamicLayout {
  // Rows [rows, padded_rows) are written too, as zeros with scale 1 (0: rows).
  int32_t padded_rows = 0;
  // scales[g * padded_rows + row] instead of scales[row * groups + g].
  bool scales_by_group = false;
};

//   x: bf16 [rows, cols], 16-byte aligned; out: e4m3 [rows, cols]; scales: fp32 [rows, cols /
//   group] (row-major). cols a positive multiple of 8; group == cols, or 128 with cols a multiple
//   of 128. Throws quench::Error naming a bad size; launches on `stream` (graph-capturable).
void quantize_fp8_dynamic_rows_cuda(int32_t rows, int32_t cols, int32_t group, const uint16_t* x,
                                    uint8_t* out, float* scales, cudaStream_t stream);
// The same with `layout`'s padding and scale order (out and scales sized for padded_rows).
void quantize_fp8_dynamic_rows_cuda(int32_t rows, int32_t cols, int32_t group, const uint16_t* x,
                                    uint8_t* out, float* scales, const Fp8DynamicLayout& layout,
                                    cudaStream_t stream);

}  // namespace quench
