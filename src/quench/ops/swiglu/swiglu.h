// GPU SwiGLU over the fused gate/up projection: gate_up is bf16 [rows, 2 * features] with the gate
// in the first half of each row and up in the second (the model concatenates the two weights),
// out[r][i] = bf16(silu(gate) * up), fp32 math as swiglu_reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/ops/quantize/fp8_rows_out.h"

namespace quench {

// Launches on `stream`; throws quench::Error for bad sizes. Graph-capturable.
void swiglu_cuda(int32_t rows, int32_t features, const uint16_t* gate_up, uint16_t* out,
                 cudaStream_t stream);

// The same rows also (or only: out may be null) written quantized for an FP8 GEMM (fp8), as
// quantize_fp8_dynamic_rows_cuda would from `out`, bit for bit; rows up to fp8.padded_rows(rows)
// (zeros, scale 1 past `rows`). One CTA per row: features a multiple of 8 and at most
// kSwigluFp8MaxFeatures, gate_up and out 16-byte aligned.
inline constexpr int32_t kSwigluFp8MaxFeatures = 32768;
void swiglu_cuda(int32_t rows, int32_t features, const uint16_t* gate_up, uint16_t* out,
                 const Fp8RowsOut& fp8, cudaStream_t stream);

}  // namespace quench
