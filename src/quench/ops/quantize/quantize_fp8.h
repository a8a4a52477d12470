// Standalone GPU quantization of bf16 rows to FP8 (or a bf16 copy): one kernel of the unfused
// rope -> quantize -> append chain. stored = fp8(x / scale(head)) (the scale divides, SPEC
// §1.2), bit-exact with quantize_fp8_per_head_reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "quench/core/dtype.h"
#include "quench/core/head_scales.h"

namespace quench {

struct QuantizeRowsParams {
  int32_t num_rows = 0;
  int32_t num_heads = 0;
  int32_t head_dim = 128;  // multiple of 8; column c belongs to head c / head_dim
  // Input bf16 bits [num_rows, num_heads, head_dim], row r at x + r * x_row_stride (elements,
  // multiple of 8). 16-byte aligned.
  const uint16_t* x = nullptr;
  int64_t x_row_stride = 0;
  // Output dense [num_rows, num_heads, head_dim] of out_dtype: fp8_e4m3, fp8_e5m2, or bf16 (a
  // copy; the scale must then be 1). 16-byte aligned.
  void* out = nullptr;
  DType out_dtype = DType::kFP8E4M3;
  HeadScales scale;  // divides; per_head is a device array [num_heads]
  // Optional device [num_rows]: rows whose entry is negative (padding tokens) are not written.
  const int64_t* row_slots = nullptr;
};

// Launches on `stream`; throws quench::Error for invalid params. Graph-capturable.
void quantize_rows_cuda(const QuantizeRowsParams& p, cudaStream_t stream);

}  // namespace quench
