// Two floats packed into one 32-bit word of two 16-bit floats: the operand pairs of the attention
// kernels' 16-bit MMAs and their bf16 stores (decode and prefill), and the bf16 rows that the
// linear and norm kernels read and write as 16-byte vectors.
#pragma once

#include <cstdint>

namespace quench {

// `lo` in the low half, `hi` in the high half, each rounded to nearest even: bf16 where kBf16,
// else f16. One cvt instruction.
template <bool kBf16>
__device__ __forceinline__ uint32_t pack_half_pair(float lo, float hi) {
  uint32_t packed;
  if constexpr (kBf16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(hi), "f"(lo));
  }
  return packed;
}

// The low and the high bf16 of a packed pair, widened to float (exact: a shift or a mask).
__device__ __forceinline__ float bf16_pair_lo(uint32_t pair) {
  return __uint_as_float(pair << 16);
}
__device__ __forceinline__ float bf16_pair_hi(uint32_t pair) {
  return __uint_as_float(pair & 0xffff0000u);
}

}  // namespace quench
