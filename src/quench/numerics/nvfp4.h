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

#include <cstdint>

#include "quench/numerics/fp8.h"

namespace quench {

inline constexpr int kNvfp4BlockSize = 16;
inline constexpr float kE2M1Max = 6.0f;

// e2m1: sign bit 3, magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Round to nearest even, saturate to
// +-6; NaN becomes +6 (as __nv_cvt_float_to_fp4 does).
// The code of |x| counts the rounding midpoints below it (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5),
// a midpoint itself rounding to the even code of its two neighbours (> where the lower one is
// even, >= where the upper one is): seven compares, no branch, where the general encode_rne took
// ~30 instructions with branches (every NVFP4 epilogue runs it per element, from cold code in
// the decode merge).
QUENCH_HD uint8_t float_to_e2m1(float x) {
  const uint32_t u = float_to_bits(x);
  const float a = bits_to_float(u & 0x7fffffffu);
  if (!(a == a)) return 0x7;  // NaN
  const uint32_t magnitude = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                             static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                             static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                             static_cast<uint32_t>(a > 5.0f);
  return static_cast<uint8_t>(((u >> 28) & 0x8u) | magnitude);
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
