// CPU reference of FP8 quantization with the project's scale convention (SPEC §1.2):
//   stored = fp8(x / scale)        (the scale divides; fp8() rounds to nearest even, saturates)
//   value  = float(stored) * scale (dequantization multiplies)
// x / scale is a true fp32 division; kernels that multiply by a precomputed 1/scale can differ
// by one fp8 ulp on ties, so they are checked with a tolerance, not bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "quench/core/dtype.h"
#include "quench/core/head_scales.h"

namespace quench {

// Throws unless scale is finite and > 0; `what` names the scale in the message ("k_scale").
void validate_fp8_scale(float scale, const char* what);
// Same for every scale a HeadScales holds (per_head read as a host array of num_heads floats).
void validate_fp8_head_scales(const HeadScales& scale, int32_t num_heads, const char* what);

// x: fp32 [n]; out: fp8 bytes [n]; fp8_dtype: fp8_e4m3 or fp8_e5m2.
void quantize_fp8_per_tensor_reference(const float* x, int64_t n, float scale, DType fp8_dtype,
                                       uint8_t* out);
// x: fp32 [num_rows, num_heads, head_dim] dense; out: fp8 bytes, same shape; head h uses
// scale.at(h) (per_head a host array of num_heads floats, or per_tensor).
void quantize_fp8_per_head_reference(const float* x, int64_t num_rows, int32_t num_heads,
                                     int32_t head_dim, const HeadScales& scale, DType fp8_dtype,
                                     uint8_t* out);

// Inverses of the above: out = float(q) * scale.
void dequantize_fp8_per_tensor_reference(const uint8_t* q, int64_t n, float scale, DType fp8_dtype,
                                         float* out);
void dequantize_fp8_per_head_reference(const uint8_t* q, int64_t num_rows, int32_t num_heads,
                                       int32_t head_dim, const HeadScales& scale, DType fp8_dtype,
                                       float* out);

// Dynamic FP8 e4m3 quantization of rows (quantize_fp8_dynamic.h): each group of `group` columns
// of a row (group == cols: the whole row) takes scales[row * (cols / group) + g] =
// fp8_scale_from_amax(its amax) and out = fp8(x / scale). x: fp32 [rows, cols]; cols % group == 0.
// scales_by_group: scales[g * rows + row] instead (cuBLASLt's 128-column activation scales).
void quantize_fp8_dynamic_rows_reference(const float* x, int32_t rows, int32_t cols, int32_t group,
                                         uint8_t* out, float* scales, bool scales_by_group = false);

// scale = amax / fp8_max(fp8_dtype), so that amax maps to the largest finite fp8 value.
// amax == 0 (an all-zero tensor) gives 1, since any scale represents zeros exactly.
// Throws for negative or non-finite amax.
float fp8_scale_from_amax(float amax, DType fp8_dtype);
// Per-tensor scale of x fp32 [n] from its amax.
float fp8_per_tensor_scale(const float* x, int64_t n, DType fp8_dtype);
// Per-head scales of x fp32 [num_rows, num_heads, head_dim]: [num_heads], from each head's amax.
std::vector<float> fp8_per_head_scales(const float* x, int64_t num_rows, int32_t num_heads,
                                       int32_t head_dim, DType fp8_dtype);

}  // namespace quench
