// The epilogue store of the warp-specialized Hopper prefill kernels (per tile and persistent): a
// consumer warp's finished rows go from the wgmma accumulator layout straight to the output in
// its dtype (bf16, FP8 with o_scale, NVFP4 with block scales, SPEC §1.2-1.3), with no
// shared-memory staging: in the persistent kernel the producer is already filling the ring with
// the next work item's K/V while the consumers store, and in the per-tile kernel each consumer
// stores as soon as its own last P V is done instead of meeting the other at a staging barrier.
// The values and conversions are those of prefill_common::store_output_tile (the fp32 value
// o * factor, then the same rounding), so both epilogues write the same bytes.
#pragma once

#include <cstdint>

#include "quench/numerics/fp8.h"
#include "quench/numerics/nvfp4.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

// o: the thread's accumulators, o[4 * dt + 2 * r + c] = row r (0, 1) of the thread, column
// 8 * dt + 2 * lane_in_group + c, unnormalized. factor[r] multiplies row r's values (v_scale /
// softmax sum). m[r]: the packed row of row r within the sequence (rows >= tile.rows are not
// stored; tile.m0 is unused). All 32 lanes of the warp call it (NVFP4 reduces over each quad).
template <int kHeadDim>
__device__ __forceinline__ void store_output_fragment(const AttentionParams& p,
                                                      const float (&o)[kHeadDim / 2],
                                                      const float (&factor)[2], const int (&m)[2],
                                                      const prefill_common::OutputTile& tile,
                                                      int lane_in_group) {
  using prefill_common::query_row;
  using prefill_common::QueryRow;
  const int64_t row_elems = static_cast<int64_t>(p.num_q_heads) * kHeadDim;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool stored = m[r] < tile.rows;
    const QueryRow qr = query_row(m[r], tile.group, tile.kv_head);
    const int64_t token = tile.q_begin + qr.token;
    // The row's first element, and the thread's first column in each 8-column block.
    const int64_t row_element = token * row_elems + qr.head * kHeadDim;
    const int64_t element = row_element + 2 * lane_in_group;
    const auto value = [&](int dt, int c) { return o[4 * dt + 2 * r + c] * factor[r]; };
    if (p.out_dtype == DType::kNVFP4) {
      // Block b (16 columns) = column blocks 2b and 2b + 1 of the quad: this lane holds its
      // elements 2 lane_in_group (+1) and 8 + 2 lane_in_group (+1).
      const int64_t scale_cols = row_elems / kNvfp4BlockSize;
#pragma unroll
      for (int b = 0; b < kHeadDim / 16; ++b) {
        const float x[4] = {value(2 * b, 0), value(2 * b, 1), value(2 * b + 1, 0),
                            value(2 * b + 1, 1)};
        float amax = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
        const uint8_t block_scale = nvfp4_block_scale(amax, p.nvfp4_global_scale);
        const float element_factor = nvfp4_element_factor(block_scale, p.nvfp4_global_scale);
        const int shift = 8 * lane_in_group;
        uint32_t packed[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          packed[half] =
              (static_cast<uint32_t>(float_to_e2m1(x[2 * half] * element_factor)) |
               static_cast<uint32_t>(float_to_e2m1(x[2 * half + 1] * element_factor)) << 4)
              << shift;
          packed[half] |= __shfl_xor_sync(0xffffffffu, packed[half], 1);
          packed[half] |= __shfl_xor_sync(0xffffffffu, packed[half], 2);
        }
        if (stored && lane_in_group == 0) {
          const int64_t block_element = row_element + b * 16;
          *reinterpret_cast<uint2*>(static_cast<unsigned char*>(p.out) + block_element / 2) =
              make_uint2(packed[0], packed[1]);
          p.out_block_scales[nvfp4_scale_offset(p.out_scale_row_offset + token,
                                                block_element / 16 % scale_cols, scale_cols)] =
              block_scale;
        }
      }
    } else if (p.out_dtype == DType::kBF16) {
      // Per group of four column blocks 4k..4k+3 (one bf16x2 word each), two butterfly rounds
      // within the quad hand lane j the whole block 4k + j (16 bytes): one 16-byte store where
      // four 4-byte ones (each touching 8 rows' lines) would keep the store unit 4x as busy.
      const bool odd = (lane_in_group & 1) != 0;
      const bool high = (lane_in_group & 2) != 0;
#pragma unroll
      for (int k = 0; k < kHeadDim / 32; ++k) {
        uint32_t words[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          words[i] = prefill_common::pack_bf16x2(value(4 * k + i, 0), value(4 * k + i, 1));
        // Round 1 (lanes j, j ^ 1), blocks 4k + 2a and 4k + 2a + 1: lane j ends with columns
        // 4 (j >> 1) .. + 3 of block 4k + 2a + (j & 1), lower columns in half[a][0].
        uint32_t half[2][2];
#pragma unroll
        for (int a = 0; a < 2; ++a) {
          const uint32_t kept = odd ? words[2 * a + 1] : words[2 * a];
          const uint32_t sent = odd ? words[2 * a] : words[2 * a + 1];
          const uint32_t received = __shfl_xor_sync(0xffffffffu, sent, 1);
          half[a][0] = odd ? received : kept;
          half[a][1] = odd ? kept : received;
        }
        // Round 2 (lanes j, j ^ 2): lane j keeps half[j >> 1] and takes the partner's half of the
        // same block, 4k + j, whose columns 0..3 sit in the lane with j >> 1 == 0.
        const uint32_t kept[2] = {high ? half[1][0] : half[0][0], high ? half[1][1] : half[0][1]};
        const uint32_t sent[2] = {high ? half[0][0] : half[1][0], high ? half[0][1] : half[1][1]};
        const uint32_t received[2] = {__shfl_xor_sync(0xffffffffu, sent[0], 2),
                                      __shfl_xor_sync(0xffffffffu, sent[1], 2)};
        const uint4 block = high ? make_uint4(received[0], received[1], kept[0], kept[1])
                                 : make_uint4(kept[0], kept[1], received[0], received[1]);
        if (stored) {
          *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + row_element +
                                    8 * (4 * k + lane_in_group)) = block;
        }
      }
    } else if (!stored) {
      continue;
    } else {
      const Fp8Format format = p.out_dtype == DType::kFP8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        const uint32_t lo = float_to_fp8(value(dt, 0) / p.o_scale, format);
        const uint32_t hi = float_to_fp8(value(dt, 1) / p.o_scale, format);
        *reinterpret_cast<uint16_t*>(static_cast<unsigned char*>(p.out) + element + 8 * dt) =
            static_cast<uint16_t>(lo | hi << 8);
      }
    }
  }
}

}  // namespace quench::prefill_hopper
