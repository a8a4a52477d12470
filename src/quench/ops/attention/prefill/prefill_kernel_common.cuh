// Device helpers shared by every prefill attention kernel: dtype conversions, the packed
// query-row mapping of a GQA group, and the output epilogue that stores a tile of finished fp32
// rows (already normalized and multiplied by v_scale) in the output dtype of AttentionParams (bf16,
// FP8 with o_scale, or NVFP4 with block scales, SPEC §1.2-1.3).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "quench/numerics/fp8.h"
#include "quench/numerics/half_pair.cuh"
#include "quench/numerics/nvfp4.h"
#include "quench/ops/attention/attention_params.h"

namespace quench::prefill_common {

// is_fp8 of dtype.h, callable in device code.
__device__ __forceinline__ bool device_is_fp8(DType dtype) {
  return dtype == DType::kFP8E4M3 || dtype == DType::kFP8E5M2;
}

// Two floats -> packed bf16x2 / f16x2 (low half = lo), round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return pack_half_pair<true>(lo, hi);
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  return pack_half_pair<false>(lo, hi);
}

// Two FP8 values (the low two bytes, low byte first) -> two floats, exact.
__device__ __forceinline__ float2 fp8x2_to_float2(uint32_t two_bytes,
                                                  __nv_fp8_interpretation_t format) {
  const __half2 h(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes), format));
  return __half22float2(h);
}

// Two FP8 values (low byte first) -> packed bf16x2, exact (every e4m3/e5m2 value is a bf16).
__device__ __forceinline__ uint32_t fp8x2_to_bf16x2(uint32_t two_bytes,
                                                    __nv_fp8_interpretation_t format) {
  const float2 f = fp8x2_to_float2(two_bytes, format);
  return pack_bf16x2(f.x, f.y);
}

// Two FP8 values (low byte first) -> packed f16x2, exact (every e4m3/e5m2 value is an f16): one
// conversion op, where bf16 takes three more (through f32).
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t two_bytes,
                                                   __nv_fp8_interpretation_t format) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes), format);
  return static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;
}

// Where packed query row m of a sequence lives: the query heads of one GQA group are packed
// into consecutive rows (row m = token m / group, head kv_head * group + m % group).
struct QueryRow {
  int token;  // index within the sequence's chunk
  int head;   // q head
};

__device__ __forceinline__ QueryRow query_row(int m, int group, int kv_head) {
  return QueryRow{m / group, kv_head * group + m % group};
}

// Where a CTA's tile of packed query rows goes.
struct OutputTile {
  int m0;     // first packed row of the tile
  int rows;   // packed rows of the sequence (q_len * group); rows >= rows are not stored
  int group;  // q heads per KV head
  int kv_head;
  int q_begin;  // the sequence's first token in the batch
};

// Stores kBlockM staged rows: tile_values[row * stride + d] (fp32, d < kHeadDim) is the final
// value of packed row tile.m0 + row. All kThreads threads of the CTA call it.
template <int kHeadDim, int kBlockM, int kThreads>
__device__ void store_output_tile(const AttentionParams& p, const float* tile_values, int stride,
                                  const OutputTile& tile, int tid) {
  const int64_t row_elems = static_cast<int64_t>(p.num_q_heads) * kHeadDim;
  if (p.out_dtype == DType::kNVFP4) {
    const int64_t scale_cols = row_elems / kNvfp4BlockSize;
    for (int idx = tid; idx < kBlockM * kHeadDim / 16; idx += kThreads) {
      const int row = idx / (kHeadDim / 16);
      const int block = idx % (kHeadDim / 16);
      const int m = tile.m0 + row;
      if (m >= tile.rows) continue;
      const QueryRow qr = query_row(m, tile.group, tile.kv_head);
      const float* x = tile_values + row * stride + block * 16;
      float amax = 0.0f;
      for (int i = 0; i < 16; ++i)
        amax = fmaxf(amax, fabsf(x[i]));
      const uint8_t block_scale = nvfp4_block_scale(amax, p.nvfp4_global_scale);
      const float element_factor = nvfp4_element_factor(block_scale, p.nvfp4_global_scale);
      uint32_t packed[2] = {0, 0};
      for (int i = 0; i < 16; ++i) {
        packed[i / 8] |= static_cast<uint32_t>(float_to_e2m1(x[i] * element_factor))
                         << (4 * (i % 8));
      }
      const int64_t token = tile.q_begin + qr.token;
      const int64_t element = token * row_elems + qr.head * kHeadDim + block * 16;
      *reinterpret_cast<uint2*>(static_cast<unsigned char*>(p.out) + element / 2) =
          make_uint2(packed[0], packed[1]);
      p.out_block_scales[nvfp4_scale_offset(p.out_scale_row_offset + token,
                                            element / 16 % scale_cols, scale_cols)] = block_scale;
    }
    return;
  }
  constexpr int kChunks = kHeadDim / 8;
  for (int idx = tid; idx < kBlockM * kChunks; idx += kThreads) {
    const int row = idx / kChunks;
    const int chunk = idx % kChunks;
    const int m = tile.m0 + row;
    if (m >= tile.rows) continue;
    const QueryRow qr = query_row(m, tile.group, tile.kv_head);
    const float* x = tile_values + row * stride + chunk * 8;
    const int64_t element =
        static_cast<int64_t>(tile.q_begin + qr.token) * row_elems + qr.head * kHeadDim + chunk * 8;
    if (p.out_dtype == DType::kBF16) {
      const uint4 v = make_uint4(pack_bf16x2(x[0], x[1]), pack_bf16x2(x[2], x[3]),
                                 pack_bf16x2(x[4], x[5]), pack_bf16x2(x[6], x[7]));
      *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + element) = v;
    } else {
      const Fp8Format format = p.out_dtype == DType::kFP8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
      uint32_t words[2] = {0, 0};
      for (int i = 0; i < 8; ++i) {
        words[i / 4] |= static_cast<uint32_t>(float_to_fp8(x[i] / p.o_scale, format))
                        << (8 * (i % 4));
      }
      *reinterpret_cast<uint2*>(static_cast<unsigned char*>(p.out) + element) =
          make_uint2(words[0], words[1]);
    }
  }
}

}  // namespace quench::prefill_common
