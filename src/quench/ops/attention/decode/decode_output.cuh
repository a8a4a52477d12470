// The decode epilogue: writes 16 consecutive output elements of one (query token, q head) row
// as bf16, FP8 (o / o_scale) or NVFP4 (one block with its swizzled e4m3 scale, SPEC §1.3),
// using the numerics headers' conversions so that results match the CPU reference bit for bit.
#pragma once

#include <cstdint>

#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/decode/decode_fragments.cuh"

namespace quench::decode {

// v: the 16 final (normalised, v-scaled) values of elements [d0, d0 + 16) of query token
// `token`, q head `head`; d0 is a multiple of 16.
__device__ __forceinline__ void write_output_block16(const AttentionParams& p, int32_t token,
                                                     int32_t head, int32_t d0,
                                                     const float (&v)[16]) {
  const int32_t head_dim = p.kv.head_dim;
  const int64_t row_elem = (static_cast<int64_t>(token) * p.num_q_heads + head) * head_dim + d0;
  if (p.out_dtype == DType::kBF16) {
    uint32_t packed[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      packed[i] = pack_pair<MmaType::kBF16>(v[2 * i], v[2 * i + 1]);
    uint4* dst = reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.out) + row_elem);
    dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  } else if (p.out_dtype == DType::kFP8E4M3 || p.out_dtype == DType::kFP8E5M2) {
    const bool e4m3 = p.out_dtype == DType::kFP8E4M3;
    uint32_t packed[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float x = v[i] / p.o_scale;  // o_scale divides (SPEC §1.2)
      const uint32_t code = e4m3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x);
      packed[i / 4] |= code << (8 * (i % 4));
    }
    *reinterpret_cast<uint4*>(static_cast<uint8_t*>(p.out) + row_elem) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  } else {  // NVFP4
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i)
      amax = fmaxf(amax, fabsf(v[i]));
    const uint8_t block_scale = nvfp4_block_scale(amax, p.nvfp4_global_scale);
    const float factor = nvfp4_element_factor(block_scale, p.nvfp4_global_scale);
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      packed[i / 8] |= static_cast<uint32_t>(float_to_e2m1(v[i] * factor)) << (4 * (i % 8));
    }
    *reinterpret_cast<uint2*>(static_cast<uint8_t*>(p.out) + row_elem / 2) =
        make_uint2(packed[0], packed[1]);
    const int64_t num_scale_cols = static_cast<int64_t>(p.num_q_heads) * head_dim / kNvfp4BlockSize;
    const int64_t col = (static_cast<int64_t>(head) * head_dim + d0) / kNvfp4BlockSize;
    p.out_block_scales[nvfp4_scale_offset(p.out_scale_row_offset + token, col, num_scale_cols)] =
        block_scale;
  }
}

}  // namespace quench::decode
