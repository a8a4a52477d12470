// Row-wise NVFP4 quantization on the host: the reference every NVFP4-writing kernel (attention
// epilogue, quantize ops) must match bit for bit. Formulas and layout: nvfp4.h and SPEC §1.3.
#pragma once

#include <cstdint>

namespace quench {

// Quantizes one row of n floats (n % 16 == 0, n > 0) to NVFP4.
//   x:            float [n]
//   global_scale: multiplies before quantization (finite, > 0), typically 448 * 6 / amax(tensor)
//   packed_out:   uint8 [n / 2], two e2m1 codes per byte, low nibble = even element
//   scales:       uint8 e4m3, the 128x4-swizzled scale tensor of the whole matrix
//                 (nvfp4_scale_bytes(rows, num_scale_cols) bytes, zero-padded by the caller);
//                 this call writes the n / 16 block scales of row `scale_row` only
//   num_scale_cols: scale columns per row of that tensor; must equal n / 16
void nvfp4_quantize_row(const float* x, int64_t n, float global_scale, uint8_t* packed_out,
                        uint8_t* scales, int64_t scale_row, int64_t num_scale_cols);

// Inverse of nvfp4_quantize_row: out[i] = e2m1(code_i) * block_scale / global_scale.
//   packed: uint8 [n / 2] (low nibble = even element); scales: the swizzled scale tensor above;
//   out:    float [n]
void nvfp4_dequantize_row(const uint8_t* packed, int64_t n, float global_scale,
                          const uint8_t* scales, int64_t scale_row, int64_t num_scale_cols,
                          float* out);

}  // namespace quench
