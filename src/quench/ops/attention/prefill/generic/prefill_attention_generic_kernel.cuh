// The generic tensor-core prefill attention kernel (FlashAttention-2 style, mma.sync, sm_80+).
//
// One CTA of 8 warps (head_dim 256: 4) per (tile of 16 packed query rows per warp, KV head,
// sequence). The query heads of one GQA group are packed into the rows (row m = token m / group,
// head h_kv * group + m % group) so each K/V tile gathered from the paged cache serves the whole
// group. Each warp owns 16 rows (their Q fragments stay in registers for head_dim <= 128). K/V
// tiles of kBlockN keys are gathered page by page through the block table with cp.async,
// double-buffered; FP8 tiles land in a byte staging buffer and are widened to bf16 in shared memory
// (exact: every e4m3/e5m2 value is a bf16 value), so one bf16 mma path serves every dtype. The
// per-tile path is kept short and branch-free: the soft-cap and the causal/window mask are one
// warp-uniform branch per tile each (the mask only on diagonal and window-edge tiles). Scales never
// touch the operands: q_scale * k_scale * sm_scale multiplies the scores, v_scale / denominator
// multiplies the output in the epilogue (SPEC §1.2).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <climits>
#include <cstdint>

#include "quench/numerics/fast_math.cuh"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_generic {

using prefill_common::device_is_fp8;
using prefill_common::fp8x2_to_bf16x2;
using prefill_common::OutputTile;
using prefill_common::pack_bf16x2;
using prefill_common::query_row;
using prefill_common::QueryRow;
using prefill_common::store_output_tile;

enum class KvKind : uint8_t { kBF16, kE4M3, kE5M2 };

constexpr int cmax(int a, int b) {
  return a > b ? a : b;
}

template <int kHeadDim, KvKind kKv>
struct PrefillConfig {
  // head_dim <= 128: 8 warps and 128 rows per CTA, so every K/V tile gathered (and, for FP8,
  // widened) in shared memory serves twice the rows of a 4-warp CTA. head_dim 256 keeps 4 warps
  // and 64 rows: its 128 fp32 accumulators per thread leave one 8-warp CTA no room to hide
  // latency, and its 128-row shared memory would not leave room for a second CTA.
  static constexpr int kThreads = kHeadDim <= 128 ? 256 : 128;
  static constexpr int kBlockM = kThreads / 32 * 16;  // packed query rows per CTA, 16 per warp
  static constexpr int kBlockN = kHeadDim > 128 ? 32 : 64;  // keys per K/V tile
  static constexpr bool kFp8Kv = kKv != KvKind::kBF16;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte bf16 chunks per row
  // head_dim <= 128: each warp keeps its Q A-fragments in registers for the whole KV loop (32
  // registers at 128), so the Q tile is only a staging area and the K/V buffers reuse it;
  // head_dim 256 has no registers to spare and re-reads Q from shared memory every tile.
  static constexpr bool kQInRegisters = kHeadDim <= 128;
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kKvOffset = kQInRegisters ? 0 : kQBytes;
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;  // one bf16 K or V tile
  static constexpr int kStagingBytes = kBlockN * kHeadDim;   // one FP8 K or V tile
  // bf16 KV: K and V tiles, two stages each. FP8 KV: one bf16 K and V tile plus two stages of
  // FP8 staging for each.
  static constexpr int kKvBytes = kFp8Kv ? 2 * kTileBytes + 4 * kStagingBytes : 4 * kTileBytes;
  static constexpr int kOutStride = kHeadDim + 8;  // floats; padding spreads the banks
  static constexpr int kOutBytes = kBlockM * kOutStride * 4;
  static constexpr int kSmemBytes = cmax(cmax(kQBytes, kKvOffset + kKvBytes), kOutBytes);
  static_assert(kBlockM == kThreads / 32 * 16, "every warp owns 16 packed query rows");
  // CTAs per SM the register budget is sized for (65536 / (n * kThreads) registers, rounded down
  // to the allocation granule of 8): head_dim 64: 2 (128 registers, 16 warps, 36 KB of shared
  // memory each); 128: 1 (no cap, so no spills; 8 warps, 68 KB); 256: 1 (no cap; 4 warps, 96 KB,
  // shared memory allows 2).
  static constexpr int kMinBlocksPerSm = kHeadDim == 64 ? 2 : 1;
  static_assert(kMinBlocksPerSm * kSmemBytes <= 227 * 1024, "shared memory per SM exceeded");
};

// Element offset of 8-element chunk `chunk` of row `row` in a [rows][kHeadDim] bf16 tile whose
// 16-byte chunks are XOR-swizzled by row, so ldmatrix of 8 rows hits 8 distinct bank groups.
template <int kHeadDim>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

// Four FP8 values (byte i of `four`) -> bf16 pairs (lo = values 0, 1; hi = values 2, 3), exact,
// without the quarter-rate conversion units: each byte's sign, exponent and mantissa bits are
// moved into bf16 position (reading the exponent with bf16's bias 127 instead of FP8's 7 / 15,
// subnormals included), and one bf16x2 multiply by 2^120 (e4m3) / 2^112 (e5m2) restores the
// bias; the product is exact. NaN/Inf codes become finite values: the cache never holds them, as
// every FP8 store saturates to ±max (SPEC §1.2).
template <KvKind kKv>
__device__ __forceinline__ void fp8x4_to_bf16x2x2(uint32_t four, uint32_t& lo, uint32_t& hi) {
  constexpr bool kE4M3 = kKv == KvKind::kE4M3;
  // A code in bits 8-15 of a half, shifted right by 4 (e4m3) / 3 (e5m2), puts its exponent in
  // the low bits of bf16's exponent field (bit 7 up) and its mantissa below it.
  constexpr int kShift = kE4M3 ? 4 : 3;
  constexpr uint32_t kMagnitude = kE4M3 ? 0x07f007f0u : 0x0fe00fe0u;
  constexpr uint32_t kBias = kE4M3 ? 0x7b807b80u : 0x77807780u;  // bf16x2 2^120 / 2^112
  // Input: two FP8 codes in bits 8-15 and 24-31, the other bits 0.
  const auto widen_pair = [](uint32_t bytes_high) {
    const uint32_t bits = (bytes_high & 0x80008000u) | ((bytes_high >> kShift) & kMagnitude);
    uint32_t out;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(out) : "r"(bits), "r"(kBias), "r"(0x80008000u));
    return out;
  };
  lo = widen_pair(__byte_perm(four, 0u, 0x1404));  // bytes 0, 1 -> bits 8-15, 24-31; rest 0
  hi = widen_pair(__byte_perm(four, 0u, 0x3424));  // bytes 2, 3 -> bits 8-15, 24-31; rest 0
}

// 8 query elements of dtype `q_dtype` at `src` -> 8 bf16 (exact for bf16 and FP8; f16 rounds).
__device__ __forceinline__ uint4 load_q_chunk_as_bf16(const void* src, DType q_dtype) {
  uint4 out;
  uint32_t* words = &out.x;
  if (q_dtype == DType::kBF16) return *static_cast<const uint4*>(src);
  if (q_dtype == DType::kF16) {
    const uint4 raw = *static_cast<const uint4*>(src);
    const uint32_t* in = &raw.x;
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&in[i]));
      words[i] = pack_bf16x2(f.x, f.y);
    }
    return out;
  }
  const __nv_fp8_interpretation_t format = q_dtype == DType::kFP8E4M3 ? __NV_E4M3 : __NV_E5M2;
  const uint2 raw = *static_cast<const uint2*>(src);
  words[0] = fp8x2_to_bf16x2(raw.x & 0xffffu, format);
  words[1] = fp8x2_to_bf16x2(raw.x >> 16, format);
  words[2] = fp8x2_to_bf16x2(raw.y & 0xffffu, format);
  words[3] = fp8x2_to_bf16x2(raw.y >> 16, format);
  return out;
}

template <int kHeadDim, KvKind kKv>
__global__ void __launch_bounds__(PrefillConfig<kHeadDim, kKv>::kThreads,
                                  PrefillConfig<kHeadDim, kKv>::kMinBlocksPerSm)
    prefill_attention_generic_kernel(const AttentionParams p) {
  using Cfg = PrefillConfig<kHeadDim, kKv>;
  constexpr int kBlockM = Cfg::kBlockM;
  constexpr int kBlockN = Cfg::kBlockN;
  constexpr int kKvElemBytes = Cfg::kFp8Kv ? 1 : 2;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* q_tile = reinterpret_cast<__nv_bfloat16*>(smem);
  unsigned char* kv_smem = smem + Cfg::kKvOffset;

  const int seq = blockIdx.z;
  const int kv_head = blockIdx.y;
  const int group = p.num_q_heads / p.kv.num_kv_heads;
  const int q_begin = p.q_offsets[seq];
  const int q_len = p.q_offsets[seq + 1] - q_begin;
  const int seq_len = p.seq_lens[seq];
  const int rows = q_len * group;
  const int m_tiles = (rows + kBlockM - 1) / kBlockM;
  // blockIdx.x == 0 takes the last (most keys under causality) tile, so heavy CTAs start first.
  const int m_tile = m_tiles - 1 - static_cast<int>(blockIdx.x);
  if (m_tile < 0) return;
  const int m0 = m_tile * kBlockM;
  const int first_pos = seq_len - q_len;  // absolute position of the chunk's token 0
  const int pos_lo = first_pos + m0 / group;
  const int pos_hi = first_pos + min(q_len - 1, (m0 + kBlockM - 1) / group);
  const int kv_begin = p.window_left >= 0 ? max(0, pos_lo - p.window_left) / kBlockN * kBlockN : 0;
  const int kv_end = pos_hi + 1;
  const int num_kv_tiles = (kv_end - kv_begin + kBlockN - 1) / kBlockN;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int lane_group = lane / 4;  // "groupID" of the mma fragment layouts
  const int lane_in_group = lane % 4;

  // Query tile -> bf16 shared memory (rows past the chunk are zero).
  for (int idx = tid; idx < kBlockM * Cfg::kChunks; idx += Cfg::kThreads) {
    const int row = idx / Cfg::kChunks;
    const int chunk = idx % Cfg::kChunks;
    const int m = m0 + row;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (m < rows) {
      const QueryRow qr = query_row(m, group, kv_head);
      const int64_t element =
          (static_cast<int64_t>(q_begin + qr.token) * p.num_q_heads + qr.head) * kHeadDim +
          chunk * 8;
      const int64_t bytes = element * (device_is_fp8(p.q_dtype) ? 1 : 2);
      value = load_q_chunk_as_bf16(static_cast<const unsigned char*>(p.q) + bytes, p.q_dtype);
    }
    *reinterpret_cast<uint4*>(q_tile + swizzled<kHeadDim>(row, chunk)) = value;
  }

  // K/V tile gather: key j of the tile comes from page block_table[j / page_size]. Keys at or
  // past kv_end are zero-filled so that masked lanes never multiply garbage (NaN) from V. Each
  // thread copies one fixed 16-byte column of kRowsPerPass-spaced rows; their page ids are all
  // read before the first cp.async so the block-table loads overlap instead of serializing.
  const int32_t* pages = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;
  const int page_shift = __ffs(p.kv.page_size) - 1;  // page_size is a power of two (16/32/64)
  // Byte strides; one page of one tensor is at most 64 * heads * 256 * 2 bytes, so in-page
  // offsets fit in 32 bits and only page * page_bytes needs 64.
  const int page_bytes = static_cast<int>(p.kv.page_elems()) * kKvElemBytes;
  const int token_bytes = static_cast<int>(p.kv.token_stride()) * kKvElemBytes;
  const int head_bytes = kv_head * static_cast<int>(p.kv.head_stride()) * kKvElemBytes;
  const auto load_kv_tile = [&](int kv0, int stage) {
    constexpr int kChunksPerRow = kHeadDim * kKvElemBytes / 16;
    constexpr int kRowsPerPass = Cfg::kThreads / kChunksPerRow;
    constexpr int kPasses = kBlockN / kRowsPerPass;
    static_assert(Cfg::kThreads % kChunksPerRow == 0 && kBlockN % kRowsPerPass == 0);
    const int chunk = tid % kChunksPerRow;
    const int first_row = tid / kChunksPerRow;
    const int column_bytes = head_bytes + chunk * 16;
    // Keys past kv_end read the last valid key's page id (always inside the block table) and
    // are then zero-filled instead of copied.
    int page[kPasses];
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      page[i] = pages[min(kv0 + first_row + i * kRowsPerPass, kv_end - 1) >> page_shift];
    }
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int row = first_row + i * kRowsPerPass;
      const int j = kv0 + row;
      const bool valid = j < kv_end;
      const int64_t src = static_cast<int64_t>(page[i]) * page_bytes +
                          ((j & (p.kv.page_size - 1)) * token_bytes + column_bytes);
      const unsigned char* k_src = static_cast<const unsigned char*>(p.k_cache) + src;
      const unsigned char* v_src = static_cast<const unsigned char*>(p.v_cache) + src;
      unsigned char* k_dst;
      unsigned char* v_dst;
      if constexpr (Cfg::kFp8Kv) {
        unsigned char* staging = kv_smem + 2 * Cfg::kTileBytes + stage * 2 * Cfg::kStagingBytes;
        k_dst = staging + row * kHeadDim + chunk * 16;
        v_dst = k_dst + Cfg::kStagingBytes;
      } else {
        unsigned char* tiles = kv_smem + stage * 2 * Cfg::kTileBytes;
        k_dst = tiles + swizzled<kHeadDim>(row, chunk) * 2;
        v_dst = k_dst + Cfg::kTileBytes;
      }
      cp_async_16(k_dst, k_src, valid);
      cp_async_16(v_dst, v_src, valid);
    }
    cp_async_commit();
  };

  // FP8 staging of `stage` -> the bf16 K and V tiles. Each thread widens one fixed 16-byte
  // column of every kRowsPerPass-th row, so the loop is unrolled with invariant addressing.
  const auto widen_fp8_tiles = [&](int stage) {
    constexpr int kChunks16 = kHeadDim / 16;  // 16 FP8 values per staging chunk
    constexpr int kRowsPerPass = Cfg::kThreads / kChunks16;
    static_assert(Cfg::kThreads % kChunks16 == 0 && kBlockN % kRowsPerPass == 0);
    const int chunk = tid % kChunks16;
    const int first_row = tid / kChunks16;
    const unsigned char* staging = kv_smem + 2 * Cfg::kTileBytes + stage * 2 * Cfg::kStagingBytes;
#pragma unroll
    for (int tensor = 0; tensor < 2; ++tensor) {  // 0: K, 1: V
#pragma unroll
      for (int i = 0; i < kBlockN / kRowsPerPass; ++i) {
        const int row = first_row + i * kRowsPerPass;
        const uint4 raw = *reinterpret_cast<const uint4*>(staging + tensor * Cfg::kStagingBytes +
                                                          row * kHeadDim + chunk * 16);
        const uint32_t* in = &raw.x;
        uint4 lo, hi;
        uint32_t* lo_words = &lo.x;
        uint32_t* hi_words = &hi.x;
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          fp8x4_to_bf16x2x2<kKv>(in[w], lo_words[2 * w], lo_words[2 * w + 1]);
          fp8x4_to_bf16x2x2<kKv>(in[w + 2], hi_words[2 * w], hi_words[2 * w + 1]);
        }
        __nv_bfloat16* tile = reinterpret_cast<__nv_bfloat16*>(kv_smem + tensor * Cfg::kTileBytes);
        *reinterpret_cast<uint4*>(tile + swizzled<kHeadDim>(row, 2 * chunk)) = lo;
        *reinterpret_cast<uint4*>(tile + swizzled<kHeadDim>(row, 2 * chunk + 1)) = hi;
      }
    }
  };

  // Per-thread state: rows r = 0, 1 are warp rows lane_group and lane_group + 8.
  int row_pos[2];
  for (int r = 0; r < 2; ++r) {
    const int m = m0 + warp * 16 + lane_group + 8 * r;
    row_pos[r] = first_pos + min(m / group, q_len - 1);  // rows past the chunk: never stored
  }
  const float q_scale_eff = device_is_fp8(p.q_dtype) ? p.q_scale : 1.0f;
  const float score_scale = p.sm_scale * q_scale_eff * p.k_scale.at(kv_head);
  const bool soft_cap = p.logit_soft_cap > 0.0f;
  const float score_scale_log2 = score_scale * kLog2e;
  // Soft-capped log2 score: cap_log2 * tanh(s * scale_over_cap) = log2(e) * cap * tanh(x / cap).
  const float scale_over_cap = soft_cap ? score_scale / p.logit_soft_cap : 0.0f;
  const float cap_log2 = p.logit_soft_cap * kLog2e;
  float o_acc[kHeadDim / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY};  // in log2 units (score * log2(e))
  float row_sum[2] = {0.0f, 0.0f};            // this thread's partial; quad-reduced at the end

  // This warp's Q A-fragment kk (16 rows x 16 dims) from the shared tile.
  const auto load_q_fragment = [&](int kk, uint32_t(&a)[4]) {
    const int q_row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
    ldmatrix_x4(a, q_tile + swizzled<kHeadDim>(q_row, kk * 2 + lane / 16));
  };
  uint32_t q_frag[Cfg::kQInRegisters ? kHeadDim / 16 : 1][4];
  if constexpr (Cfg::kQInRegisters) {
    __syncthreads();  // the Q tile is complete
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk)
      load_q_fragment(kk, q_frag[kk]);
    __syncthreads();  // every warp holds its fragments before K/V overwrite the Q tile
  }

  if (num_kv_tiles > 0) load_kv_tile(kv_begin, 0);
  for (int tile = 0; tile < num_kv_tiles; ++tile) {
    const int kv0 = kv_begin + tile * kBlockN;
    const int stage = tile & 1;
    cp_async_wait_all();
    __syncthreads();  // tile's data visible; every warp is done with the previous tile
    // The next tile's copies start before the FP8 widening so they overlap it; they land in the
    // other stage, which the previous iteration finished reading before the barrier above.
    if (tile + 1 < num_kv_tiles) load_kv_tile(kv0 + kBlockN, stage ^ 1);
    if constexpr (Cfg::kFp8Kv) {
      widen_fp8_tiles(stage);
      __syncthreads();
    }
    const int tile_stage = Cfg::kFp8Kv ? 0 : stage;
    const __nv_bfloat16* k_tile =
        reinterpret_cast<const __nv_bfloat16*>(kv_smem + tile_stage * 2 * Cfg::kTileBytes);
    const __nv_bfloat16* v_tile = k_tile + kBlockN * kHeadDim;

    // S = Q K^T for this warp's 16 rows.
    float s[kBlockN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t a[4];
      if constexpr (Cfg::kQInRegisters) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          a[i] = q_frag[kk][i];
      } else {
        load_q_fragment(kk, a);
      }
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t b[4];
        const int k_row = np * 16 + (lane % 8) + (lane / 16) * 8;
        ldmatrix_x4(b, k_tile + swizzled<kHeadDim>(k_row, kk * 2 + (lane / 8) % 2));
        mma_bf16_16816(s[2 * np], a, b[0], b[1]);
        mma_bf16_16816(s[2 * np + 1], a, b[2], b[3]);
      }
    }

    // Scores -> log2 units (scale, optional soft-cap), then the mask, each as one warp-uniform
    // branch per tile: only the diagonal and window-edge tiles pay for the mask.
    if (soft_cap) {
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[nt][e] = cap_log2 * fast_tanh(s[nt][e] * scale_over_cap);
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[nt][e] *= score_scale_log2;
      }
    }
    const bool needs_mask =
        kv0 + kBlockN - 1 > pos_lo || (p.window_left >= 0 && kv0 < pos_hi - p.window_left);
    if (needs_mask) {
      // Column c of the tile (this thread's key kv0 + c) is visible to row r iff
      // visible_lo[r] <= c <= visible_hi[r].
      const int lane_key = kv0 + 2 * lane_in_group;
      int visible_lo[2], visible_hi[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        visible_hi[r] = row_pos[r] - lane_key;
        visible_lo[r] = p.window_left >= 0 ? row_pos[r] - p.window_left - lane_key : INT_MIN;
      }
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = nt * 8 + (e & 1);
          if (c > visible_hi[e / 2] || c < visible_lo[e / 2]) s[nt][e] = -INFINITY;
        }
      }
    }
    float offset[2], correction[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row that has seen only masked keys keeps max -inf; subtract 0 to avoid inf - inf.
      offset[r] = new_max == -INFINITY ? 0.0f : new_max;
      correction[r] = fast_exp2(row_max[r] - offset[r]);
      row_max[r] = new_max;
      row_sum[r] *= correction[r];
    }
    // Once the running maxima settle, most tiles leave every row's max unchanged; the warp then
    // skips the rescale of its accumulators (a multiply by exactly 1).
    if (__any_sync(0xffffffffu, correction[0] != 1.0f || correction[1] != 1.0f)) {
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o_acc[dt][e] *= correction[e / 2];
      }
    }
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[nt][e] = fast_exp2(s[nt][e] - offset[e / 2]);
      row_sum[0] += s[nt][0] + s[nt][1];
      row_sum[1] += s[nt][2] + s[nt][3];
    }

    // O += P V, P taken from the S accumulators as bf16 A fragments.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]),
                             pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const int v_row = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
      for (int dp = 0; dp < kHeadDim / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile + swizzled<kHeadDim>(v_row, dp * 2 + lane / 16));
        mma_bf16_16816(o_acc[2 * dp], a, b[0], b[1]);
        mma_bf16_16816(o_acc[2 * dp + 1], a, b[2], b[3]);
      }
    }
  }

  // Epilogue: normalize (sinks join the denominator), apply v_scale, write the LSE, stage the
  // fp32 rows in shared memory, then store them in the output dtype.
  __syncthreads();
  float* out_tile = reinterpret_cast<float*>(smem);
  const float v_scale = p.v_scale.at(kv_head);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = warp * 16 + lane_group + 8 * r;
    const int m = m0 + row;
    const QueryRow qr = query_row(m, group, kv_head);
    if (p.sinks != nullptr && m < rows) sum += exp2f(p.sinks[qr.head] * kLog2e - row_max[r]);
    const float factor = sum > 0.0f ? v_scale / sum : 0.0f;
    if (p.lse != nullptr && m < rows && lane_in_group == 0) {
      p.lse[static_cast<int64_t>(q_begin + qr.token) * p.num_q_heads + qr.head] =
          (row_max[r] + log2f(sum)) * 0.6931471805599453f;
    }
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      *reinterpret_cast<float2*>(out_tile + row * Cfg::kOutStride + dt * 8 + 2 * lane_in_group) =
          make_float2(o_acc[dt][2 * r] * factor, o_acc[dt][2 * r + 1] * factor);
    }
  }
  __syncthreads();

  store_output_tile<kHeadDim, kBlockM, Cfg::kThreads>(
      p, out_tile, Cfg::kOutStride, OutputTile{m0, rows, group, kv_head, q_begin}, tid);
}

}  // namespace quench::prefill_generic
