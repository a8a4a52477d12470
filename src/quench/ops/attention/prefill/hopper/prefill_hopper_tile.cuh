// The building blocks of the Hopper prefill kernel (prefill_attention_hopper_kernel.cuh), one
// KV tile's worth: the per-(operand kind, head_dim) configuration with its shared-memory plan,
// the 128-byte-swizzled tile layouts, the copy passes that build the V^T (and widened K)
// operands, and the wgmma steps S = Q K^T, P -> A fragments, P V. Kept apart from the kernel so
// that the layout probe test (tests/ops/attention/prefill_hopper_layout_gpu_test.cu) runs
// exactly these steps on exact integer data.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "quench/numerics/fast_math.cuh"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/hopper/sm90_ptx.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

enum class HopperKind : uint8_t {
  kFp8,         // q e4m3, KV e4m3: FP8 wgmma
  kBf16,        // q bf16, KV bf16: bf16 wgmma
  kBf16QFp8Kv,  // q bf16, KV e4m3: q converted, K and V widened to f16 in shared memory
  kFp8QkF16Pv,  // q e4m3, KV e4m3: FP8 wgmma for Q K^T, f16 P and V widened to f16 for P V
};

template <HopperKind kKind, int kHeadDimT>
struct HopperConfig {
  // Q K^T on FP8 operands (e4m3 q and K); P V on FP8 operands (e4m3 P and V, two-level).
  static constexpr bool kFp8Qk = kKind == HopperKind::kFp8 || kKind == HopperKind::kFp8QkF16Pv;
  static constexpr bool kFp8Pv = kKind == HopperKind::kFp8;
  static constexpr bool kFp8Kv = kKind != HopperKind::kBf16;
  // bf16 q over FP8 KV widens K to f16 in shared memory, so its Q K^T runs on f16 operands: the
  // Q tile is converted once per work item (q_rows_to_f16: exact, with a power-of-two scale per
  // warp that keeps bf16's range inside f16's and is folded into the score scale).
  static constexpr bool kWidenK = kKind == HopperKind::kBf16QFp8Kv;
  // 16-bit P V over FP8 V (bf16 q over FP8 KV, FP8 q with 16-bit P V) runs on f16 operands: V
  // widens to f16 in one conversion per pair (F2FP.F16.E4M3.UNPACK_B, exact), where bf16 took
  // three more (to f32 and back), and P in [0, 1] keeps 11 significant bits instead of 8.
  static constexpr bool kF16Pv = kFp8Kv && !kFp8Pv;
  // The producer's widening bounded these kinds; H200 per-tile kernel (bench/LOG.md, twelfth
  // session), TFLOP/s bf16 / f16 operands: bf16 q over FP8 KV 332 -> 389 at b2 x 8k, 350 -> 410 at
  // b1 x 16k, hd64 287 -> 332, hd256 348 -> 390; FP8 q with 16-bit P V (f16 P V only) 542 -> 599 at
  // 8k.
  static constexpr int kHeadDim = kHeadDimT;
  static constexpr int kWarpgroups = 2;
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kBlockM = 64 * kWarpgroups;  // packed query rows per CTA
  // Keys per K/V tile: 64 at head_dim 256 keeps S and O in registers. bf16 q over FP8 KV at
  // head_dim 128 takes 64 too: its ring slots hold the widened bf16 K and V (64 KB at 128 keys),
  // which left room for two slots only, and with two every tile's build waited for the V release
  // of the tile before it (the producer on the consumers' critical path); 64-key tiles have four.
  // H200, b2 x 8k causal (bench/LOG.md, tenth session): 304 -> 328 TFLOP/s at page 16, 305 -> 336
  // at page 64 (per tile; the persistent kernel -1%). At head_dim 64 (four slots already) 64-key
  // tiles lost 1-8%.
  static constexpr int kBlockN =
      kHeadDim == 256 || (kKind == HopperKind::kBf16QFp8Kv && kHeadDim == 128) ? 64 : 128;
  static constexpr int kQkBytes = kFp8Qk ? 1 : 2;  // bytes per Q (and K operand) element
  static constexpr int kPvBytes = kFp8Pv ? 1 : 2;  // bytes per P (and V^T operand) element
  static constexpr int kKvBytes = kFp8Kv ? 1 : 2;  // bytes per cached element
  // The FP8 operand layouts (128-byte rows of Q, K and V^T, the V^T permutation, T in 64
  // registers, 128-key tiles for FP8 Q K^T) need head_dim 128; bf16 operand rows are 128, 256
  // or 512 bytes.
  static_assert(kHeadDim == 128 || (!kFp8Qk && (kHeadDim == 64 || kHeadDim == 256)),
                "unsupported head_dim for this operand kind");
  static constexpr int kQBytes = kBlockM * kHeadDim * kQkBytes;
  static constexpr int kKOperandBytes = kBlockN * kHeadDim * kQkBytes;
  static constexpr int kVtBytes = kBlockN * kHeadDim * kPvBytes;
  // One cached K or V tile; rows shorter than 128 bytes (FP8 at head_dim 64) are padded to one
  // swizzled 128-byte row.
  static constexpr int kKvRowBytes = kHeadDim * kKvBytes < 128 ? 128 : kHeadDim * kKvBytes;
  static constexpr int kStageBytes = kBlockN * kKvRowBytes;
  // Shared memory, every tile 1024-byte aligned: Q; two stages of K and of V as cached; the
  // widened K operand (bf16 q over FP8 KV only); V^T.
  static constexpr int kQOffset = 0;
  static constexpr int kKStageOffset = kQBytes;
  static constexpr int kVStageOffset = kKStageOffset + 2 * kStageBytes;
  static constexpr int kKWideOffset = kVStageOffset + 2 * kStageBytes;
  static constexpr int kVtOffset = kKWideOffset + (kWidenK ? kKOperandBytes : 0);
  // bf16 P V: two V^T buffers let tile i's P V run on the tensor cores while tile i + 1
  // is prepared (its wait moves to tile i + 1's Q K^T wait), where they fit (not at head_dim
  // 256). FP8 waits at once: T living across the next Q K^T would spill registers.
  static constexpr int kMaxSmemBytes = 227 * 1024;
  static constexpr bool kDeferPv = !kFp8Pv && kVtOffset + 2 * kVtBytes + 1024 <= kMaxSmemBytes;
  static constexpr int kVtStages = kDeferPv ? 2 : 1;
  static constexpr int kOperandBytes = kVtOffset + kVtStages * kVtBytes;
  static constexpr int kOutStride = kHeadDim + 4;  // floats; padding spreads the banks
  static constexpr int kOutBytes = kBlockM * kOutStride * 4;
  static_assert(kOutBytes <= kOperandBytes, "the fp32 output tile reuses the operand tiles");
  // + slack to align the dynamic shared memory window to the 1024-byte swizzle atom.
  static constexpr int kSmemBytes = kOperandBytes + 1024;
  // P enters P V as mma_type(P * kPScale); the epilogue divides it out.
  static constexpr float kPScale = kFp8Pv ? 256.0f : 1.0f;
  static constexpr int kQkSteps = kHeadDim * kQkBytes / 32;  // 32-byte k steps of Q K^T
  static constexpr int kPvSteps = kBlockN * kPvBytes / 32;   // 32-byte k steps of P V
  // Q K^T reads Q's A fragments from registers (QOperand, loaded once per work item) instead of
  // shared memory where Q K^T runs on 16-bit operands (bf16 q over FP8 or bf16 KV) at head_dim
  // <= 128: Q costs kQkSteps x 4 registers per consumer thread (32 at head_dim 128) and the SS
  // wgmma's A reads leave shared memory to K (and, over FP8 KV, the producer's widening). bf16 q
  // over FP8 KV first (its 64-key tiles fetch 2 KB of A and 2 KB of B per 32 tensor cycles, all
  // of the SM's 128 bytes per cycle): H200 per tile (bench/LOG.md, thirteenth session) 390 -> 397
  // TFLOP/s at b2 x 8k, 412 -> 422 at b1 x 16k. bf16 (fourteenth session, calls 1 and 6): head_dim
  // 64 per tile 409 -> 426 at b2 x 8k, persistent 395 -> 403; head_dim 128 per tile +2-5% (8k
  // page 16 569 -> 593, 16k page 64 600 -> 631), persistent -1.7% at 1k, +0.5-1.5% from 8k (see
  // persistent_by_default). FP8 q kinds: even or worse (FP8 P V's 240-register consumers spill).
  static constexpr bool kQInRegisters = kQkBytes == 2 && kHeadDim <= 128;
  // Each consumer warp loads (and, f16 Q K^T, converts) the 16 Q rows its accumulators own,
  // instead of the warpgroup striding over all 64 (q_chunk_index, ws_load_q_rows). Q in
  // registers needs it: a warp's fragment loads then read only rows its own lanes write for the
  // next work item, which a __syncwarp orders (load_q_fragments); with the strided load another
  // warp writes them and nothing orders the two (racecheck errors at head_dim 64, bench/LOG.md
  // thirteenth session).
  static constexpr bool kQRowsPerWarp = kWidenK || kQInRegisters;
  static_assert(kQBytes % 1024 == 0 && kStageBytes % 1024 == 0 && kKOperandBytes % 1024 == 0 &&
                    kVtBytes % 1024 == 0,
                "every tile starts on a swizzle atom");
};

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

// The descriptor of the tile `bytes` past `desc`'s start: the start address field (bits 0-13,
// 16-byte units) of the low word only. Shared addresses stay below 2^18, so it never carries
// out of the field; one uniform add per wgmma instead of rebuilding the descriptor.
__device__ __forceinline__ uint64_t descriptor_plus(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xffffffff00000000ull) | lo;
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

// 16-bit wgmma (bf16, or f16 with kF16) with B of N rows (N = 64, 128 or 256), A from shared
// memory (SS) or registers.
template <int N, bool kF16 = false>
__device__ __forceinline__ void wgmma_16bit_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                               bool accumulate) {
  if constexpr (N == 64) {
    sm90::wgmma_m64n64k16_16bit_ss<kF16>(d, desc_a, desc_b, accumulate);
  } else {
    static_assert(N == 128, "Q K^T tiles have 64 or 128 keys");
    sm90::wgmma_m64n128k16_16bit_ss<kF16>(d, desc_a, desc_b, accumulate);
  }
}

template <int N, bool kBMnMajor = false, bool kF16 = false>
__device__ __forceinline__ void wgmma_16bit_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                               uint64_t desc_b, bool accumulate) {
  if constexpr (N == 64) {
    sm90::wgmma_m64n64k16_16bit_rs<kBMnMajor, kF16>(d, a, desc_b, accumulate);
  } else if constexpr (N == 128) {
    sm90::wgmma_m64n128k16_16bit_rs<kBMnMajor, kF16>(d, a, desc_b, accumulate);
  } else {
    static_assert(N == 256, "P V covers head_dim 64, 128 or 256");
    sm90::wgmma_m64n256k16_16bit_rs<kBMnMajor, kF16>(d, a, desc_b, accumulate);
  }
}

// The steps of one KV tile, shared by the kernel and the layout probe test
// (tests/ops/attention/prefill_hopper_layout_gpu_test.cu). Cfg is a HopperConfig.

// V as cached -> V^T operand (and, bf16 q over FP8 KV, K as cached -> widened K operand);
// returns the K operand. All kWorkers threads (tid < kWorkers: the CTA, or the producer
// warpgroup of the warp-specialized kernel) call it; the caller fences and syncs.
template <class Cfg, int kWorkers = Cfg::kThreads>
__device__ __forceinline__ const unsigned char* prepare_kv_operands(const unsigned char* k_stage,
                                                                    const unsigned char* v_stage,
                                                                    unsigned char* k_wide,
                                                                    unsigned char* vt, int tid) {
  if constexpr (Cfg::kFp8Pv) {
    transpose_v_fp8<kWorkers>(v_stage, vt, tid);
  } else {
    transpose_v_16bit<kWorkers, Cfg::kFp8Kv, Cfg::kHeadDim, Cfg::kBlockN>(v_stage, vt, tid);
  }
  if constexpr (Cfg::kWidenK) {
    widen_fp8_tile<kWorkers, Cfg::kHeadDim, Cfg::kBlockN>(k_stage, k_wide, tid);
    return k_wide;
  } else {
    return k_stage;
  }
}

// The Q tile chunk (16 bytes) that thread gtid of a warpgroup loads in its round j (< kQChunks
// / 2), as an index over the warpgroup's 64 rows (row idx / kQChunks, chunk idx % kQChunks).
// With Cfg::kQRowsPerWarp each warp loads the 16 rows its accumulators own (q_rows_to_f16 scales
// them per warp); otherwise the warpgroup's threads stride over all 64.
template <class Cfg>
__device__ __forceinline__ int q_chunk_index(int gtid, int j) {
  constexpr int kQChunks = Cfg::kHeadDim * Cfg::kQkBytes / 16;
  if constexpr (Cfg::kQRowsPerWarp) {
    return gtid / 32 * (16 * kQChunks) + gtid % 32 + 32 * j;
  } else {
    return gtid + 128 * j;
  }
}

// f16 Q K^T: the bf16 Q rows this thread loaded (q_chunk_index, warpgroup `warpgroup`, after
// its cp.async wait) -> f16 in place, times 2^-e with e the smallest exponent >= 0 that puts the
// warp's largest |q| below 2^15 (f16's max is 65504). Returns 2^e, the factor of the warp's raw
// Q K^T scores. bf16 -> f16 is exact unless e > 0, where elements below 2^(e - 24) of the warp's
// largest lose bits (bf16 q beyond 2^15 is far outside what attention layers produce). The
// caller fences for the async proxy and syncs the warpgroup before a wgmma reads the tile.
template <class Cfg>
__device__ __forceinline__ float q_rows_to_f16(unsigned char* q_tile, int warpgroup, int gtid) {
  static_assert(Cfg::kWidenK && Cfg::kQkBytes == 2, "f16 Q K^T converts a bf16 Q tile");
  constexpr int kQChunks = Cfg::kHeadDim * 2 / 16;
  const auto chunk_at = [&](int j) {
    const int idx = q_chunk_index<Cfg>(gtid, j);
    return reinterpret_cast<uint4*>(
        q_tile + block_tile_offset(Cfg::kBlockM, 64 * warpgroup + idx / kQChunks, idx % kQChunks));
  };
  // |bf16| bit patterns order as their values (Inf 0x7f80, NaN above).
  const auto warp_amax_bits = [&](bool finite_only) {
    uint32_t amax = 0;
    for (int j = 0; j < kQChunks / 2; ++j) {
      const uint4 v = *chunk_at(j);
      for (const uint32_t w : {v.x, v.y, v.z, v.w}) {
        for (const uint32_t h : {w & 0x7fffu, w >> 16 & 0x7fffu}) {
          if (!finite_only || h < 0x7f80u) amax = max(amax, h);
        }
      }
    }
    return __reduce_max_sync(0xffffffffu, amax);
  };
  uint32_t amax_bits = warp_amax_bits(false);
  // A non-finite q (a broken upstream value) stays its own row's problem: the scale comes from
  // the warp's finite values, so the other rows keep their precision (rare: a second pass).
  if (amax_bits >= 0x7f80u) amax_bits = warp_amax_bits(true);
  // floor(log2(amax)) is the bf16 exponent field - 127 (0 and subnormals read as tiny).
  const int e = max(0, static_cast<int>(amax_bits >> 7) - 127 - 14);
  const float down = __int_as_float((127 - e) << 23);  // 2^-e, e <= 114
  for (int j = 0; j < kQChunks / 2; ++j) {
    uint4* chunk = chunk_at(j);
    uint4 v = *chunk;
    for (uint32_t* w : {&v.x, &v.y, &v.z, &v.w}) {
      *w = prefill_common::pack_f16x2(__uint_as_float(*w << 16) * down,
                                      __uint_as_float(*w & 0xffff0000u) * down);
    }
    *chunk = v;
  }
  return __int_as_float((127 + e) << 23);
}

// The A operand of one warpgroup's Q K^T, its 64 Q rows: their shared address (column block 0),
// and where Cfg::kQInRegisters their A fragments, fragment ks for k16 step ks (register i: row
// 16 * warp + lane / 4 + 8 * (i % 2), columns 16 ks + 8 (i / 2) + 2 (lane % 4) + 0..1: the
// wgmma register layout of a 16-bit A).
template <bool kInRegisters, int kSteps>
struct QFragments {
  uint32_t frag[kSteps][4];
};
template <int kSteps>
struct QFragments<false, kSteps> {};

template <class Cfg>
struct QOperand : QFragments<Cfg::kQInRegisters, Cfg::kQkSteps> {
  uint32_t address;
};

// Warpgroup `warpgroup`'s Q operand over the Q tile at q_tile: its rows' shared address; where
// Cfg::kQInRegisters, load_q_fragments then fills its fragments.
template <class Cfg>
__device__ __forceinline__ QOperand<Cfg> q_operand_at(const unsigned char* q_tile, int warpgroup) {
  QOperand<Cfg> q;
  q.address = sm90::smem_address(q_tile) + warpgroup * 64 * 128;
  return q;
}

// Where Cfg::kQInRegisters, loads warpgroup `warpgroup`'s Q fragments from the Q tile (one
// ldmatrix.x4 per k step: its four 8x8 b16 matrices are rows 0-7 / 8-15 of the warp's 16 times
// the step's two 16-byte chunks, lane l addressing row l % 8 of matrix l / 8); nothing
// otherwise. Called by the warpgroup's 128 threads (gtid) once the rows are in their final form
// and visible to the warp (each warp reads only its own 16 rows), before the wgmma fence of the
// first Q K^T that reads them.
template <class Cfg>
__device__ __forceinline__ void load_q_fragments(QOperand<Cfg>& q, const unsigned char* q_tile,
                                                 int warpgroup, int gtid) {
  if constexpr (Cfg::kQInRegisters) {
    const int lane = gtid % 32;
    const int row = 64 * warpgroup + 16 * (gtid / 32) + lane % 8 + 8 * (lane / 8 % 2);
#pragma unroll
    for (int ks = 0; ks < Cfg::kQkSteps; ++ks) {
      prefill_generic::ldmatrix_x4(
          q.frag[ks], q_tile + block_tile_offset(Cfg::kBlockM, row, 2 * ks + lane / 16));
    }
    // Each lane read rows other lanes of the warp write next (the next item's cp.async and
    // q_rows_to_f16, where no named barrier lies between: head_dim 64 has no ping-pong turns).
    __syncwarp();
  }
}

// After the Q K^T wait: pins q's fragments (where it has them) until then, so that the compiler
// reuses none of their registers while the asynchronous wgmma may still read them.
template <class Cfg>
__device__ __forceinline__ void fence_q_operand(QOperand<Cfg>& q) {
  if constexpr (Cfg::kQInRegisters) sm90::fence_registers(q.frag);
}

// Issues S = Q K^T for one warpgroup (its Q operand q: q_operand_at, load_q_fragments); the
// caller fences before and commits / waits after, then calls fence_q_operand.
template <class Cfg>
__device__ __forceinline__ void issue_qk(float (&s)[Cfg::kBlockN / 2], const QOperand<Cfg>& q,
                                         uint32_t k_address) {
  [[maybe_unused]] const uint64_t a0 = sm90::smem_descriptor_sw128(q.address);
  const uint64_t b0 = sm90::smem_descriptor_sw128(k_address);
#pragma unroll
  for (int ks = 0; ks < Cfg::kQkSteps; ++ks) {
    const uint64_t b = descriptor_plus(b0, kstep_address(0, Cfg::kBlockN, ks));
    if constexpr (Cfg::kQInRegisters) {
      static_assert(!Cfg::kFp8Qk, "Q is held in registers for 16-bit Q K^T only");
      wgmma_16bit_rs<Cfg::kBlockN, false, Cfg::kWidenK>(s, q.frag[ks], b, ks > 0);
    } else {
      const uint64_t a = descriptor_plus(a0, kstep_address(0, Cfg::kBlockM, ks));
      if constexpr (Cfg::kFp8Qk) {
        sm90::wgmma_m64n128k32_e4m3_ss(s, a, b, ks > 0);
      } else {
        wgmma_16bit_ss<Cfg::kBlockN, Cfg::kWidenK>(s, a, b, ks > 0);
      }
    }
  }
}

// FP8 P V's A fragment register i of k32 step ks (keys 32ks..32ks+31) holds row r = i % 2 at
// permuted k positions 16(i/2) + 4t + 0..3 = keys 32ks + 16(i/2) + {2t, 2t+1, 2t+8, 2t+9}, i.e.
// S column blocks nt = 4ks + 2(i/2) and nt + 1, elements 2r and 2r + 1: those four S values,
// in byte order.
template <class Cfg>
__device__ __forceinline__ float4 fp8_p_fragment_values(const float (&s)[Cfg::kBlockN / 2], int ks,
                                                        int i) {
  const int r = i % 2;
  const int nt = 4 * ks + 2 * (i / 2);
  return make_float4(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1], s[4 * (nt + 1) + 2 * r],
                     s[4 * (nt + 1) + 2 * r + 1]);
}

// P (the S registers after the softmax) -> the A fragments of P V, as mma_type(P * kPScale);
// kPreScaled: the softmax already wrote P * kPScale (online_softmax_tile's kPScaleLog2).
template <class Cfg, bool kPreScaled = false>
__device__ __forceinline__ void pack_p(const float (&s)[Cfg::kBlockN / 2],
                                       uint32_t (&p_frag)[Cfg::kPvSteps][4]) {
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (Cfg::kFp8Pv) {
        constexpr float kScale = kPreScaled ? 1.0f : Cfg::kPScale;
        const float4 x = fp8_p_fragment_values<Cfg>(s, ks, i);
        p_frag[ks][i] = pack_e4m3x4(x.x * kScale, x.y * kScale, x.z * kScale, x.w * kScale);
      } else {
        // k16 step ks (keys 16ks..16ks+15): the bf16 A fragment is the accumulator layout of S
        // column blocks 2ks (registers 0, 1: rows r = 0, 1) and 2ks + 1 (registers 2, 3).
        const int nt = 2 * ks + i / 2;
        const int r = i % 2;
        p_frag[ks][i] = Cfg::kF16Pv
                            ? prefill_common::pack_f16x2(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1])
                            : prefill_common::pack_bf16x2(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]);
      }
    }
  }
}

// FP8 P V's two-term P (each work item's last two KV tiles, see ws_two_term_tail): P * kPScale
// (already scaled by the softmax, <= 256) as hi + lo, two e4m3 fragments: hi its leading e4m3
// value (fp8_e4m3_leading_value), lo the rounded remainder. hi + lo is within 2^-8 of P for
// P >= 2^-10 and 2^-17 absolute below (bf16-class: P <= 1 is the max-relative weight), against
// 2^-4 for one e4m3 term, at the price of a second FP8 P V on those tiles.
template <class Cfg>
__device__ __forceinline__ void pack_p_two_term(const float (&s)[Cfg::kBlockN / 2],
                                                uint32_t (&p_hi)[Cfg::kPvSteps][4],
                                                uint32_t (&p_lo)[Cfg::kPvSteps][4]) {
  static_assert(Cfg::kFp8Pv, "two-term P is FP8 P V's");
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 x = fp8_p_fragment_values<Cfg>(s, ks, i);
      const float4 hi = make_float4(fp8_e4m3_leading_value(x.x), fp8_e4m3_leading_value(x.y),
                                    fp8_e4m3_leading_value(x.z), fp8_e4m3_leading_value(x.w));
      p_hi[ks][i] = pack_e4m3x4(hi.x, hi.y, hi.z, hi.w);
      p_lo[ks][i] = pack_e4m3x4(x.x - hi.x, x.y - hi.y, x.z - hi.z, x.w - hi.w);
    }
  }
}

// Issues acc (+)= P V^T-operand: FP8 overwrites acc (the tile accumulator T) unless
// accumulate_first (a two-term P's second term), bf16 accumulates into O. The caller fences
// before and commits / waits after.
template <class Cfg>
__device__ __forceinline__ void issue_pv(float (&acc)[Cfg::kHeadDim / 2],
                                         const uint32_t (&p_frag)[Cfg::kPvSteps][4],
                                         uint32_t vt_address, bool accumulate_first = false) {
  const uint64_t b0 = sm90::smem_descriptor_sw128(vt_address);
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
    const uint64_t b = descriptor_plus(b0, kstep_address(0, Cfg::kHeadDim, ks));
    if constexpr (Cfg::kFp8Pv) {
      sm90::wgmma_m64n128k32_e4m3_rs(acc, p_frag[ks], b, accumulate_first || ks > 0);
    } else {
      wgmma_16bit_rs<Cfg::kHeadDim, false, Cfg::kF16Pv>(acc, p_frag[ks], b, true);
    }
  }
}

// FP8 P V with two-term P (pack_p_two_term): t = P_hi V + P_lo V. The caller fences before and
// commits / waits after.
template <class Cfg>
__device__ __forceinline__ void issue_pv_two_term(float (&t)[Cfg::kHeadDim / 2],
                                                  const uint32_t (&p_hi)[Cfg::kPvSteps][4],
                                                  const uint32_t (&p_lo)[Cfg::kPvSteps][4],
                                                  uint32_t vt_address) {
  static_assert(Cfg::kFp8Pv, "two-term P is FP8 P V's");
  issue_pv<Cfg>(t, p_hi, vt_address);
  issue_pv<Cfg>(t, p_lo, vt_address, /*accumulate_first=*/true);
}

// The second e4m3 term of P already packed by pack_p (one term, round to nearest even): lo =
// P * kPScale - e4m3(P * kPScale), exact in float, as e4m3 (hi + lo within 2^-8, as
// pack_p_two_term's, whose hi rounds ties away instead), stored to `held`: word j of thread
// `tid` at held[j * kThreads + tid] (conflict-free). load_held_p_lo reads it back.
template <class Cfg, int kThreads>
__device__ __forceinline__ void hold_p_lo(const float (&s)[Cfg::kBlockN / 2],
                                          const uint32_t (&p_frag)[Cfg::kPvSteps][4],
                                          uint32_t* held, int tid) {
  static_assert(Cfg::kFp8Pv, "two-term P is FP8 P V's");
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 x = fp8_p_fragment_values<Cfg>(s, ks, i);
      const float2 hi01 = prefill_common::fp8x2_to_float2(p_frag[ks][i] & 0xffffu, __NV_E4M3);
      const float2 hi23 = prefill_common::fp8x2_to_float2(p_frag[ks][i] >> 16, __NV_E4M3);
      held[(4 * ks + i) * kThreads + tid] =
          pack_e4m3x4(x.x - hi01.x, x.y - hi01.y, x.z - hi23.x, x.w - hi23.y);
    }
  }
}

template <class Cfg, int kThreads>
__device__ __forceinline__ void load_held_p_lo(const uint32_t* held,
                                               uint32_t (&p_lo)[Cfg::kPvSteps][4], int tid) {
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      p_lo[ks][i] = held[(4 * ks + i) * kThreads + tid];
  }
}

// After P V's wait: pins P's A fragments (and the accumulator P V wrote) so that no register
// is reused before the wgmma completed; FP8 P V then adds its tile result T into O in fp32 (the
// two-level accumulation), bf16 P V accumulated into O already. Cfg is a HopperConfig.
template <class Cfg>
__device__ __forceinline__ void finish_pv(uint32_t (&p_frag)[Cfg::kPvSteps][4],
                                          float (&t_acc)[Cfg::kHeadDim / 2],
                                          float (&o_acc)[Cfg::kHeadDim / 2]) {
  sm90::fence_registers(p_frag);
  if constexpr (Cfg::kFp8Pv) {
    sm90::fence_registers(t_acc);
#pragma unroll
    for (int i = 0; i < Cfg::kHeadDim / 2; ++i)
      o_acc[i] += t_acc[i];
  } else {
    sm90::fence_registers(o_acc);
  }
}

// What scales and masks the S accumulators of one thread's two rows (packed rows lane / 4 and
// lane / 4 + 8 of its warp); fixed for the CTA. Shared by both Hopper kernels.
struct ScoreTransform {
  float score_scale;     // sm_scale * q_scale (FP8 q only) * k_scale: multiplies raw Q K^T
  float logit_soft_cap;  // > 0 (the kernel's kSoftCap): scores become cap * tanh(score / cap)
  int window_left;       // -1: no sliding window
  int pos_lo;            // lowest / highest absolute position among the CTA's rows
  int pos_hi;
  int row_pos[2];     // absolute position of this thread's two rows
  int lane_in_group;  // lane % 4: which key pair of each 8-key column block the thread holds
};

// Whether the tile of keys kv0 .. kv0 + kBlockN - 1 holds a key past one of the CTA's rows
// (causal) or before one's sliding window; uniform over the CTA. All but a few tiles per CTA
// need no mask.
template <int kBlockN>
__device__ __forceinline__ bool tile_needs_mask(const ScoreTransform& t, int kv0) {
  return kv0 + kBlockN - 1 > t.pos_lo || (t.window_left >= 0 && kv0 < t.pos_hi - t.window_left);
}

// Updates the online softmax state of the thread's rows with one S tile (row_max in log2 units,
// row_sum this thread's partial) and turns S into P, whose max-relative scale changed by
// `correction` per row. O is left to the caller, which multiplies it by `correction` once it is
// not in flight. Without soft-cap the raw scores stay as they are: t.score_scale > 0 (every
// scale is finite and > 0, see attention_reference.cc), so the row max of the raw scores, times
// score_scale * log2(e), is the row max in log2 units, and each P element is one FFMA and one
// ex2: exp2(s * c - max * c). With soft-cap (kSoftCap: t.logit_soft_cap > 0, chosen on the host)
// the scores first become cap * tanh(score / cap) in log2 units. Tiles that tile_needs_mask are
// masked (-inf) before the max. P (and row_sum) come out times 2^kPScaleLog2, folded into the
// exp2's FFMA (FP8 P V's kPScale, which would otherwise cost one FMUL per element).
// Code size is the point of the shape (instruction-cache stalls): the soft-cap switch is a
// template parameter, and the mask is a separate pass behind one uniform branch. Runtime
// switches inside the fully unrolled element loop made the compiler keep a copy of the whole
// unrolled body per combination.
template <int kBlockN, bool kSoftCap, int kPScaleLog2 = 0>
__device__ __forceinline__ void online_softmax_tile(const ScoreTransform& t, int kv0,
                                                    float (&s)[kBlockN / 2], float (&row_max)[2],
                                                    float (&row_sum)[2], float (&correction)[2]) {
  constexpr float kLog2e = 1.4426950408889634f;
  float to_log2;  // multiplies s into log2 units
  if constexpr (kSoftCap) {
    // One division per tile, not per element: (s * scale) / cap compiled to a full-precision
    // division per element (a slow-path CALL and FCHK each, 64 per tile and thread).
    const float scale_over_cap = t.score_scale / t.logit_soft_cap;
    const float cap_log2 = t.logit_soft_cap * kLog2e;
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i)
      s[i] = cap_log2 * fast_tanh(s[i] * scale_over_cap);
    to_log2 = 1.0f;
  } else {
    to_log2 = t.score_scale * kLog2e;
  }
  if (tile_needs_mask<kBlockN>(t, kv0)) {
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = kv0 + nt * 8 + 2 * t.lane_in_group + (e & 1);
        const int pos = t.row_pos[e / 2];
        if (j > pos || (t.window_left >= 0 && j < pos - t.window_left)) s[4 * nt + e] = -INFINITY;
      }
    }
  }
  // Each row's max and sum run as kParts independent partial chains: a single running max /
  // sum made each a chain of kBlockN / 4 dependent FMNMX / FADD, and a row's exps could not
  // start before its whole max chain (and the shuffles) had retired. H200: FP8 P·V +1.5-1.8% at
  // 8k-16k tokens, the other kinds even (bench/LOG.md, tenth session). Max is exact in any
  // order; the sum's order changes its rounding only.
  constexpr int kParts = 4;  // the two combining lines below take four
  constexpr int kColumnBlocks = kBlockN / 8;
  static_assert(kColumnBlocks % kParts == 0, "every partial chain takes the same blocks");
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float part[kParts];
#pragma unroll
    for (int k = 0; k < kParts; ++k)
      part[k] = fmaxf(s[4 * k + 2 * r], s[4 * k + 2 * r + 1]);
#pragma unroll
    for (int nt = kParts; nt < kColumnBlocks; ++nt)
      part[nt % kParts] = fmaxf(part[nt % kParts], fmaxf(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]));
    float tile_max = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(row_max[r], tile_max * to_log2);
    // A row that has seen only masked keys keeps max -inf; subtract 0 to avoid inf - inf.
    const float offset = new_max == -INFINITY ? 0.0f : new_max;
    correction[r] = fast_exp2(row_max[r] - offset);
    row_max[r] = new_max;
    const float p_offset = offset - static_cast<float>(kPScaleLog2);
    float sum[kParts] = {};
#pragma unroll
    for (int nt = 0; nt < kColumnBlocks; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float& e = s[4 * nt + 2 * r + c];
        e = fast_exp2(fmaf(e, to_log2, -p_offset));
        sum[nt % kParts] += e;
      }
    }
    row_sum[r] = fmaf(row_sum[r], correction[r], (sum[0] + sum[1]) + (sum[2] + sum[3]));
  }
}

// bf16 V as cached, or FP8 V widened by widen_fp8_tile (a block-split swizzled tile of kBlockN
// key rows, see block_tile_offset), is already the MN-major B operand of P V: keys are K, dims are
// N, each key row's 64-dim column block is one swizzled 128-byte row. O += P V with no V^T pass;
// k16 step ks starts at key 16 ks, 2048 bytes into column block 0. The caller fences before and
// commits / waits after.
template <class Cfg>
__device__ __forceinline__ void issue_pv_v_mn_major(float (&o)[Cfg::kHeadDim / 2],
                                                    const uint32_t (&p_frag)[Cfg::kPvSteps][4],
                                                    uint32_t v_address) {
  static_assert(!Cfg::kFp8Pv, "wgmma takes an N-major B for 16-bit types only");
  constexpr uint32_t kColumnBlockBytes = Cfg::kBlockN * 128;
  const uint64_t b0 = sm90::smem_descriptor_sw128_mn_major(v_address, kColumnBlockBytes);
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
    const uint64_t b = descriptor_plus(b0, static_cast<uint32_t>(ks * 16 * 128));
    wgmma_16bit_rs<Cfg::kHeadDim, true, Cfg::kF16Pv>(o, p_frag[ks], b, true);
  }
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
