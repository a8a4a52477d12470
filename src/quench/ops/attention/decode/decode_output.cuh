// The decode epilogue: writes 4 consecutive output elements of one (query token, q head) row as
// bf16 (and, where asked, as the o projection's e4m3 rows: AttentionParams::out_fp8), FP8
// (o / o_scale) or NVFP4 (a quarter block; its swizzled e4m3 scale, SPEC §1.3),
// using the numerics headers' conversions so that results match the CPU reference bit for bit.
#pragma once

#include <cstdint>

#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/quantize/fp8_rows_out.cuh"

namespace quench::decode {

// Output elements one thread writes: four lanes (lane % 4 = 0..3) hold one 16-element NVFP4 block.
inline constexpr int kOutputQuad = 4;

// v: the 4 final (normalised, v-scaled) values of elements [d0, d0 + 4) of query token `token`,
// q head `head`; d0 is a multiple of 4, and lanes lane ^ 1, lane ^ 2 of the calling warp hold
// the other quads of the same 16-element block (d0 % 16 == 4 * (lane % 4)). Every lane of the
// warp calls it (full-mask shuffles in the NVFP4 path); an inactive lane (`active` false, e.g.
// past the last row) stores nothing, and its block's other lanes are inactive too.
//
// Why quads: one thread per 16-element block left most of a CTA idle while a few threads ran 16
// serial conversions each (NVFP4: 16 software e2m1 encodes), and unrolled that code 16 times,
// which the merge kernel's CTAs fetch cold; the FP8 and NVFP4 outputs cost 0.6 and 1.9 us over
// bf16 at B1 x 1k (H200, bench/LOG.md). The values, their order of operations and the codes
// are the same as the CPU reference's.
__device__ __forceinline__ void write_output_quad(const AttentionParams& p, int32_t token,
                                                  int32_t head, int32_t d0, const float (&v)[4],
                                                  bool active) {
  const int32_t head_dim = p.kv.head_dim;
  const int64_t row_elem = (static_cast<int64_t>(token) * p.num_q_heads + head) * head_dim + d0;
  if (p.out_dtype == DType::kBF16) {
    const uint2 packed =
        make_uint2(pack_pair<MmaType::kBF16>(v[0], v[1]), pack_pair<MmaType::kBF16>(v[2], v[3]));
    if (p.out_fp8.requested()) {
      // The o projection's input: the bf16 values just rounded, quantized per head (head_dim
      // 128: a 128-column group is a warp's row), as its own pass would read them back.
      const float rounded[kOutputQuad] = {
          bf16_bits_to_float(packed.x & 0xffffu), bf16_bits_to_float(packed.x >> 16),
          bf16_bits_to_float(packed.y & 0xffffu), bf16_bits_to_float(packed.y >> 16)};
      fp8_rows_device::store_group_quad(p.out_fp8, p.num_tokens, token, p.num_q_heads * head_dim,
                                        head * head_dim + d0, active, rounded);
    }
    if (!active || p.out == nullptr) return;
    *reinterpret_cast<uint2*>(static_cast<uint16_t*>(p.out) + row_elem) = packed;
  } else if (p.out_dtype == DType::kFP8E4M3 || p.out_dtype == DType::kFP8E5M2) {
    if (!active) return;
    const bool e4m3 = p.out_dtype == DType::kFP8E4M3;
    uint32_t packed = 0;
#pragma unroll
    for (int i = 0; i < kOutputQuad; ++i) {
      const float x = v[i] / p.o_scale;  // o_scale divides (SPEC §1.2)
      const uint32_t code = e4m3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x);
      packed |= code << (8 * i);
    }
    *reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(p.out) + row_elem) = packed;
  } else {  // NVFP4
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kOutputQuad; ++i)
      amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    if (!active) return;
    const uint8_t block_scale = nvfp4_block_scale(amax, p.nvfp4_global_scale);
    const float factor = nvfp4_element_factor(block_scale, p.nvfp4_global_scale);
    uint32_t packed = 0;
#pragma unroll
    for (int i = 0; i < kOutputQuad; ++i)
      packed |= static_cast<uint32_t>(float_to_e2m1(v[i] * factor)) << (4 * i);
    *reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(p.out) + row_elem / 2) =
        static_cast<uint16_t>(packed);
    if (d0 % kNvfp4BlockSize == 0) {
      const int64_t num_scale_cols =
          static_cast<int64_t>(p.num_q_heads) * head_dim / kNvfp4BlockSize;
      const int64_t col = (static_cast<int64_t>(head) * head_dim + d0) / kNvfp4BlockSize;
      p.out_block_scales[nvfp4_scale_offset(p.out_scale_row_offset + token, col, num_scale_cols)] =
          block_scale;
    }
  }
}

}  // namespace quench::decode
