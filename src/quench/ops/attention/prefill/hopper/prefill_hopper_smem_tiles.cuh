// The Hopper prefill kernels' shared-memory tiles: the 128-byte-swizzled, block-split layout of
// K, V and Q tiles with their wgmma descriptors, and the copy passes that build the V^T operand
// (FP8 P V) or widen FP8 K / V to f16 (16-bit products over an FP8 cache).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "quench/core/sm90_wgmma.cuh"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

#ifdef QUENCH_SM90A_ENABLED

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of `tile_rows` rows whose rows
// are split into 128-byte column blocks, each a 128-byte-swizzled K-major tile.
__device__ __forceinline__ int block_tile_offset(int tile_rows, int row, int chunk) {
  return (chunk >> 3) * tile_rows * 128 + sm90::swizzle128_offset(row, chunk & 7);
}

// Shared address of 32-byte k step `step` of a block-split tile (see block_tile_offset) whose
// first row of interest starts at `base` within column block 0.
__device__ __forceinline__ uint32_t kstep_address(uint32_t base, int tile_rows, int step) {
  return base + static_cast<uint32_t>((step >> 2) * tile_rows * 128 + 32 * (step & 3));
}

// Four floats -> four e4m3 bytes (first in the low byte), round to nearest even, saturating.
__device__ __forceinline__ uint32_t pack_e4m3x4(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// Byte i of the result = byte (selector nibble i) of the 8 bytes {b, a} (a = bytes 0-3).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
}

// FP8: V as cached (swizzled [key][dim], 128 x 128 bytes) -> V^T (swizzled [dim][k position])
// with the key permutation described in prefill_attention_hopper_kernel.cuh: k positions
// 16g + 4t + 0..3 of every dim hold keys 16g + {2t, 2t+1, 2t+8, 2t+9} (16-key block g < 8,
// t < 4). Warp w of the 128 threads (the producer warpgroup) moves dims 32w..32w+31 of every
// block g: ldmatrix.trans of four 8x8 16-bit tiles (keys 16g + 0..7 and 16g + 8..15, times dims
// 32w + 0..15 and 32w + 16..31) hands lane l the bytes of keys 16g + 2t, 2t+1 (t = l % 4) and,
// from the second tile, 16g + 2t+8, 2t+9, each at dims 2j, 2j+1 of the tile's 16 (j = l / 4);
// two byte permutes make the V^T words of dims 2j and 2j+1, which stmatrix stores as row j of
// four 8x8 tiles (even and odd dims of either half). The 8 rows of an ldmatrix tile are 8 keys
// in 8 distinct 16-byte bank groups (the swizzle); those of a stmatrix tile, dims 2r (+1), share
// 4 (two-way conflicts). No per-element address math: each lane's row addresses are fixed, and
// block g adds 2048 bytes to the load address and XORs the stored chunk.
template <int kThreads>
__device__ __forceinline__ void transpose_v_fp8(const unsigned char* v, unsigned char* vt,
                                                int tid) {
  static_assert(kThreads == 128, "four warps of 32 dims each");
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int tile = lane / 8;  // the 8x8 tile whose row `row` this lane addresses
  const int row = lane % 8;
  // ldmatrix tile `tile`: key 16g + 8 (tile % 2) + row (its low 3 bits, `row`, XOR the chunk),
  // 16-byte dim chunk 2 warp + tile / 2.
  const unsigned char* load_row =
      v + (8 * (tile % 2) + row) * 128 + (((2 * warp + tile / 2) ^ row) << 4);
  // stmatrix tile `tile`: V^T row (dim) 32 warp + 16 (tile / 2) + 2 row + tile % 2, chunk g.
  const int dim = 32 * warp + 16 * (tile / 2) + 2 * row + tile % 2;
  // The shared address of chunk 0 ^ (dim % 8) of the row; chunk g ^ (dim % 8) XORs g into
  // address bits 4-6 (vt is 1024-aligned): one instruction per store, nothing kept live per g,
  // as the warp-specialized producer has 24 registers.
  const uint32_t store_row = sm90::smem_address(vt + dim * 128 + (dim % 8) * 16);
#pragma unroll
  for (int g = 0; g < 8; ++g) {
    uint32_t in[4];
    prefill_generic::ldmatrix_x4_trans(in, load_row + g * 16 * 128);
    // in[0] bytes: keys 2t (dims 2j, 2j+1), 2t+1 (dims 2j, 2j+1); in[1] the same for 2t+8, 2t+9.
    const uint32_t out[4] = {prmt(in[0], in[1], 0x6420), prmt(in[0], in[1], 0x7531),
                             prmt(in[2], in[3], 0x6420), prmt(in[2], in[3], 0x7531)};
    sm90::stmatrix_x4(out, store_row ^ static_cast<uint32_t>(g << 4));
  }
}

// 16-bit operands: V as cached (bf16 [key][dim], or e4m3 [key][dim] widened here to f16; both
// block-split swizzled tiles of kBlockN rows) -> V^T [dim][key] (block-split swizzled tile of
// kHeadDim rows). Unit u moves keys 2p, 2p+1 x dims 2e, 2e+1; lanes vary over
// (e % 8, p % 4).
template <int kThreads, bool kFp8Source, int kHeadDim, int kBlockN>
__device__ __forceinline__ void transpose_v_16bit(const unsigned char* v, unsigned char* vt,
                                                  int tid) {
  constexpr int kDimGroups = kHeadDim / 16;  // groups of 8 dim pairs
  constexpr int kUnits = kHeadDim / 2 * kBlockN / 2;
  static_assert(kUnits % kThreads == 0, "every thread moves the same number of units");
  // A fixed trip count, unrolled by 4: lane_part is the thread's own (kThreads is a multiple
  // of 32) and the index math folds to per-thread invariants plus constants. A full unroll
  // hoists every load and spills.
#pragma unroll 4
  for (int it = 0; it < kUnits / kThreads; ++it) {
    const int u = tid + it * kThreads;
    const int lane_part = u % 32;
    const int rest = u / 32;
    const int e = lane_part % 8 + 8 * (rest % kDimGroups);
    const int key = 2 * (lane_part / 8 + 4 * (rest / kDimGroups));
    uint32_t in[2];  // dims 2e, 2e+1 of keys key, key + 1 as bf16x2
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if constexpr (kFp8Source) {
        const uint16_t two = *reinterpret_cast<const uint16_t*>(
            v + block_tile_offset(kBlockN, key + i, e / 8) + (2 * e) % 16);
        in[i] = prefill_common::fp8x2_to_f16x2(two, __NV_E4M3);
      } else {
        in[i] = *reinterpret_cast<const uint32_t*>(v + block_tile_offset(kBlockN, key + i, e / 4) +
                                                   (e % 4) * 4);
      }
    }
    const int byte_in_chunk = (key % 8) * 2;
    *reinterpret_cast<uint32_t*>(vt + block_tile_offset(kHeadDim, 2 * e, key / 8) + byte_in_chunk) =
        prmt(in[0], in[1], 0x5410);
    *reinterpret_cast<uint32_t*>(vt + block_tile_offset(kHeadDim, 2 * e + 1, key / 8) +
                                 byte_in_chunk) = prmt(in[0], in[1], 0x7632);
  }
}

// e4m3 [key][dim] (K or V as cached, block-split swizzled) -> f16 [key][dim] (block-split
// swizzled), exactly: the f16 K operand of bf16 q over FP8 KV, and the MN-major f16 V operand of
// P V over FP8 V (issue_pv_v_mn_major).
template <int kThreads, int kHeadDim, int kBlockN>
__device__ __forceinline__ void widen_fp8_tile(const unsigned char* k, unsigned char* k_wide,
                                               int tid) {
  constexpr int kChunks = kHeadDim / 16;  // 16 FP8 values per chunk
  static_assert(kBlockN * kChunks % kThreads == 0, "every thread widens the same number of chunks");
  // A fixed trip count, unrolled by 2 (see transpose_v_16bit): the warp-specialized producer
  // (56 registers) widens K and V of one tile back to back.
#pragma unroll 2
  for (int it = 0; it < kBlockN * kChunks / kThreads; ++it) {
    const int u = tid + it * kThreads;
    const int key = u / kChunks;
    const int chunk = u % kChunks;
    const uint4 raw = *reinterpret_cast<const uint4*>(k + block_tile_offset(kBlockN, key, chunk));
    const uint32_t* in = &raw.x;
    uint4 lo, hi;
    uint32_t* lo_words = &lo.x;
    uint32_t* hi_words = &hi.x;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      lo_words[2 * i] = prefill_common::fp8x2_to_f16x2(in[i] & 0xffffu, __NV_E4M3);
      lo_words[2 * i + 1] = prefill_common::fp8x2_to_f16x2(in[i] >> 16, __NV_E4M3);
      hi_words[2 * i] = prefill_common::fp8x2_to_f16x2(in[i + 2] & 0xffffu, __NV_E4M3);
      hi_words[2 * i + 1] = prefill_common::fp8x2_to_f16x2(in[i + 2] >> 16, __NV_E4M3);
    }
    *reinterpret_cast<uint4*>(k_wide + block_tile_offset(kBlockN, key, 2 * chunk)) = lo;
    *reinterpret_cast<uint4*>(k_wide + block_tile_offset(kBlockN, key, 2 * chunk + 1)) = hi;
  }
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
