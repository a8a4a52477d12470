// NVFP4: e2m1 values packed two per byte (low nibble = even element), one FP8 e4m3 block scale
// per 16 consecutive elements, and a global scale gs (SPEC §1.3).
//
//   block_scale = e4m3(amax(block) * gs / 6)           (stored in the swizzled scale tensor)
//   code_i      = e2m1(x_i * (gs / float(block_scale)))  (0 when block_scale == 0)
//   x_i        ~= float(code_i) * float(block_scale) / gs
//
// gs multiplies before quantization (typically gs = 448 * 6 / amax(tensor)). Every GPU epilogue
// uses exactly these two expressions so that it matches the CPU reference bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "quench/numerics/fp8.h"

namespace quench {

inline constexpr int kNvfp4BlockSize = 16;
inline constexpr float kE2M1Max = 6.0f;

// e2m1: sign bit 3, magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Round to nearest even, saturate to
// +-6; NaN becomes +6 (as __nv_cvt_float_to_fp4 does).
// Branch-free, with short dependency chains: every NVFP4 epilogue runs it per element, and in the
// decode merge its four encodes per thread are on the critical path. The form before (seven
// midpoint compares feeding one chain of increments, behind a NaN branch) was the largest part
// of NVFP4's 0.37 us over bf16 output at B1 x 1k on the H200; this one took 0.15-0.2 us off it
// (bench/LOG.md). Equal to CUDA's __nv_cvt_float_to_fp4 on all 2^32 floats (NumericsExhaustiveGpu).
//  - |x| < 1, grid 0, 0.5, 1: the code is rint(2|x|), which the float 2|x| + 2^23 holds in its
//    low mantissa bits (one fused multiply-add, rounded to nearest even once);
//  - |x| >= 1, one mantissa bit: the float's bits rounded to nearest even at bit 22 hold the code
//    in their exponent and that bit (1.0 = code 2), saturated at 7 (6.0; also inf and NaN).
QUENCH_HD uint8_t float_to_e2m1(float x) {
  const uint32_t u = float_to_bits(x);
  const uint32_t abs_bits = u & 0x7fffffffu;
  const float a = bits_to_float(abs_bits);
  const uint32_t below_one = float_to_bits(fmaf(a, 2.0f, 8388608.0f)) - 0x4B000000u;
  const uint32_t rounded = abs_bits + 0x1FFFFFu + ((abs_bits >> 22) & 1u);
  const uint32_t at_least_one = (rounded >> 22) - 252u;  // wraps (unused) where a < 1
  const uint32_t magnitude = a < 1.0f ? below_one : (at_least_one < 7u ? at_least_one : 7u);
  const uint32_t sign = abs_bits > 0x7f800000u ? 0u : (u >> 28) & 0x8u;  // NaN: +
  return static_cast<uint8_t>(sign | magnitude);
}

QUENCH_HD float e2m1_to_float(uint8_t code) {
  // Index = low three bits: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  const uint32_t m = code & 0x7u;
  const float magnitude =
      m < 4 ? 0.5f * static_cast<float>(m)
            : static_cast<float>(1u << ((m - 2) >> 1)) * (1.0f + 0.5f * static_cast<float>(m & 1u));
  return (code & 0x8u) ? -magnitude : magnitude;
}

// The block scale for a block whose largest magnitude is `amax`.
QUENCH_HD uint8_t nvfp4_block_scale(float amax, float global_scale) {
  return float_to_fp8_e4m3(amax * global_scale / kE2M1Max);
}

// The factor each element of a block is multiplied by before e2m1 rounding.
QUENCH_HD float nvfp4_element_factor(uint8_t block_scale, float global_scale) {
  const float bs = fp8_e4m3_to_float(block_scale);
  return bs == 0.0f ? 0.0f : global_scale / bs;
}

// Dequantized value of one element: e2m1 value * block scale / global scale, in that order.
QUENCH_HD float nvfp4_dequantize_element(uint8_t code, uint8_t block_scale, float global_scale) {
  return e2m1_to_float(code) * fp8_e4m3_to_float(block_scale) / global_scale;
}

// Byte offset of scale column `col` (one per 16 elements) of row `row` in the 128x4-swizzled
// scale tensor of shape [round_up(rows,128), round_up(cols,4)], cols = H*D/16.
QUENCH_HD int64_t nvfp4_scale_offset(int64_t row, int64_t col, int64_t num_scale_cols) {
  const int64_t col_tiles = (num_scale_cols + 3) / 4;
  return ((row / 128) * col_tiles + col / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 +
         col % 4;
}

// Size in bytes of the swizzled scale tensor for `rows` x `num_scale_cols`.
inline int64_t nvfp4_scale_bytes(int64_t rows, int64_t num_scale_cols) {
  return (rows + 127) / 128 * 128 * ((num_scale_cols + 3) / 4 * 4);
}

}  // namespace quench
