// The Hopper (sm_90a) prefill attention kernel on warpgroup MMA (wgmma), head_dim 128, in three
// operand kinds: FP8 (e4m3 Q over an e4m3 cache, FP8 wgmma), bf16 (bf16 Q over a bf16 cache) and
// bf16 Q over an e4m3 cache (K and V widened exactly to bf16 in shared memory, bf16 wgmma).
//
// One CTA of two warpgroups per (tile of 128 packed query rows, KV head, sequence); warpgroup w
// owns packed rows 64w..64w+63 (GQA heads packed into rows as in the generic kernel). Per KV
// tile of 128 keys, gathered page by page through the block table with cp.async (all 256
// threads, double-buffered, the next tile in flight while the current one is computed):
//   S = Q K^T       wgmma SS, Q and K tiles in 128-byte-swizzled K-major shared memory (rows
//                   of 256 bf16 bytes as two 128-byte column blocks), one 32-byte k step per
//                   wgmma (k32 FP8, k16 bf16; descriptor start + 32 bytes per step);
//   online softmax  on the accumulator registers (the mma.sync C layout, as in the generic
//                   kernel), in log2 units with q_scale * k_scale * sm_scale folded into the
//                   score scale (SPEC §1.2; no q_scale for a bf16 query);
//   P -> A operand  straight from the S registers: bf16 pairs, whose layout is the accumulator
//                   layout; or e4m3 of P * 256 (<= 256 < 448, keeps probabilities down to 2^-14
//                   normal);
//   P V             wgmma RS; V needs K-major (keys contiguous), so a copy pass writes V^T into
//                   a swizzled tile. For FP8 it permutes each 32-key block so that k position
//                   16h + 4t + i holds key 16h + 8(i/2) + 2t + i%2: exactly the keys a thread's
//                   S registers hold where the 8-bit A fragment expects k = 16h + 4t + i
//                   (t = lane % 4);
//   FP8 two-level   each tile's P V goes into a zeroed accumulator T, then O = O + T in fp32
//                   registers (O was scaled by the softmax correction before): FP8 tensor-core
//                   accumulation (about 22 bits) is confined to one 128-key tile (SPEC §3).
//                   bf16 accumulates into O directly (fp32 on the tensor core).
// The epilogue multiplies by v_scale / (P scale * denominator) and stores through the shared
// output epilogue (bf16, FP8, NVFP4), as the generic kernel does.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/hopper/sm90_ptx.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

enum class HopperKind : uint8_t {
  kFp8,         // q e4m3, KV e4m3: FP8 wgmma
  kBf16,        // q bf16, KV bf16: bf16 wgmma
  kBf16QFp8Kv,  // q bf16, KV e4m3 widened to bf16 in shared memory: bf16 wgmma
};

template <HopperKind kKind, int kHeadDimT>
struct HopperConfig {
  static constexpr bool kFp8Mma = kKind == HopperKind::kFp8;
  static constexpr bool kFp8Kv = kKind != HopperKind::kBf16;
  static constexpr bool kWidenK = kKind == HopperKind::kBf16QFp8Kv;
  static constexpr int kHeadDim = kHeadDimT;
  static constexpr int kWarpgroups = 2;
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kBlockM = 64 * kWarpgroups;  // packed query rows per CTA
  // Keys per K/V tile: 64 at head_dim 256 keeps S and O in registers.
  static constexpr int kBlockN = kHeadDim == 256 ? 64 : 128;
  static constexpr int kMmaBytes = kFp8Mma ? 1 : 2;  // bytes per MMA operand element (and q)
  static constexpr int kKvBytes = kFp8Kv ? 1 : 2;    // bytes per cached element
  // The FP8 operand layouts (128-byte rows of Q, K and V^T, the V^T permutation, T in 64
  // registers) need head_dim 128; bf16 operand rows are 128, 256 or 512 bytes.
  static_assert(kHeadDim == 128 || (!kFp8Mma && (kHeadDim == 64 || kHeadDim == 256)),
                "unsupported head_dim for this operand kind");
  static constexpr int kQBytes = kBlockM * kHeadDim * kMmaBytes;
  static constexpr int kOperandTileBytes = kBlockN * kHeadDim * kMmaBytes;  // K or V^T operand
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
  static constexpr int kVtOffset = kKWideOffset + (kWidenK ? kOperandTileBytes : 0);
  // bf16 operands: two V^T buffers let tile i's P V run on the tensor cores while tile i + 1
  // is prepared (its wait moves to tile i + 1's Q K^T wait), where they fit (not at head_dim
  // 256). FP8 waits at once: T living across the next Q K^T would spill registers.
  static constexpr int kMaxSmemBytes = 227 * 1024;
  static constexpr bool kDeferPv =
      !kFp8Mma && kVtOffset + 2 * kOperandTileBytes + 1024 <= kMaxSmemBytes;
  static constexpr int kVtStages = kDeferPv ? 2 : 1;
  static constexpr int kOperandBytes = kVtOffset + kVtStages * kOperandTileBytes;
  static constexpr int kOutStride = kHeadDim + 4;  // floats; padding spreads the banks
  static constexpr int kOutBytes = kBlockM * kOutStride * 4;
  static_assert(kOutBytes <= kOperandBytes, "the fp32 output tile reuses the operand tiles");
  // + slack to align the dynamic shared memory window to the 1024-byte swizzle atom.
  static constexpr int kSmemBytes = kOperandBytes + 1024;
  // P enters P V as mma_type(P * kPScale); the epilogue divides it out.
  static constexpr float kPScale = kFp8Mma ? 256.0f : 1.0f;
  static constexpr int kQkSteps = kHeadDim * kMmaBytes / 32;  // 32-byte k steps of Q K^T
  static constexpr int kPvSteps = kBlockN * kMmaBytes / 32;   // 32-byte k steps of P V
  static_assert(kQBytes % 1024 == 0 && kStageBytes % 1024 == 0 && kOperandTileBytes % 1024 == 0,
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

// 2^x with the MUFU approximation (relative error ~2^-22, flushes subnormal results to 0;
// 2^-inf = 0), without exp2f's full-range fix-ups: the softmax's hottest instruction.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
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
// with the key permutation described at the top. Unit u moves 4 keys x 4 dims: keys
// 32c + 16h + {2t, 2t+1, 2t+8, 2t+9} of dims 4q..4q+3 land at k positions 32c + 16h + 4t + 0..3
// of rows 4q..4q+3. Lanes vary over (q % 8, t) so the reads hit 32 distinct banks.
template <int kThreads>
__device__ __forceinline__ void transpose_v_fp8(const unsigned char* v, unsigned char* vt,
                                                int tid) {
  constexpr int kUnits = 4 * 2 * 4 * 32;
  for (int u = tid; u < kUnits; u += kThreads) {
    const int lane_part = u % 32;
    const int rest = u / 32;
    const int t = lane_part / 8;
    const int q = lane_part % 8 + 8 * (rest / 8);
    const int h = rest % 2;
    const int c = (rest / 2) % 4;
    const int key0 = 32 * c + 16 * h + 2 * t;
    const int keys[4] = {key0, key0 + 1, key0 + 8, key0 + 9};
    uint32_t in[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      in[i] = *reinterpret_cast<const uint32_t*>(v + sm90::swizzle128_offset(keys[i], q / 4) +
                                                 (q % 4) * 4);
    }
    // Interleave pairs, then pairs of pairs: out[e] = bytes e of in[0..3].
    const uint32_t k01_lo = prmt(in[0], in[1], 0x5140);  // in0.b0 in1.b0 in0.b1 in1.b1
    const uint32_t k01_hi = prmt(in[0], in[1], 0x7362);  // in0.b2 in1.b2 in0.b3 in1.b3
    const uint32_t k23_lo = prmt(in[2], in[3], 0x5140);
    const uint32_t k23_hi = prmt(in[2], in[3], 0x7362);
    const uint32_t out[4] = {prmt(k01_lo, k23_lo, 0x5410), prmt(k01_lo, k23_lo, 0x7632),
                             prmt(k01_hi, k23_hi, 0x5410), prmt(k01_hi, k23_hi, 0x7632)};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      *reinterpret_cast<uint32_t*>(vt + sm90::swizzle128_offset(4 * q + e, 2 * c + h) + 4 * t) =
          out[e];
    }
  }
}

// bf16 operands: V as cached (bf16 [key][dim], or e4m3 [key][dim] widened here; both
// block-split swizzled tiles of kBlockN rows) -> V^T bf16 [dim][key] (block-split swizzled tile
// of kHeadDim rows). Unit u moves keys 2p, 2p+1 x dims 2e, 2e+1; lanes vary over (e % 8, p % 4).
template <int kThreads, bool kFp8Source, int kHeadDim, int kBlockN>
__device__ __forceinline__ void transpose_v_bf16(const unsigned char* v, unsigned char* vt,
                                                 int tid) {
  constexpr int kDimGroups = kHeadDim / 16;  // groups of 8 dim pairs
  constexpr int kUnits = kHeadDim / 2 * kBlockN / 2;
  for (int u = tid; u < kUnits; u += kThreads) {
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
        in[i] = prefill_common::fp8x2_to_bf16x2(two, __NV_E4M3);
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

// bf16 q over FP8 KV: K as cached (e4m3 [key][dim], block-split swizzled) -> the bf16 K
// operand (block-split swizzled), exactly.
template <int kThreads, int kHeadDim, int kBlockN>
__device__ __forceinline__ void widen_k(const unsigned char* k, unsigned char* k_wide, int tid) {
  constexpr int kChunks = kHeadDim / 16;  // 16 FP8 values per chunk
  for (int u = tid; u < kBlockN * kChunks; u += kThreads) {
    const int key = u / kChunks;
    const int chunk = u % kChunks;
    const uint4 raw = *reinterpret_cast<const uint4*>(k + block_tile_offset(kBlockN, key, chunk));
    const uint32_t* in = &raw.x;
    uint4 lo, hi;
    uint32_t* lo_words = &lo.x;
    uint32_t* hi_words = &hi.x;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      lo_words[2 * i] = prefill_common::fp8x2_to_bf16x2(in[i] & 0xffffu, __NV_E4M3);
      lo_words[2 * i + 1] = prefill_common::fp8x2_to_bf16x2(in[i] >> 16, __NV_E4M3);
      hi_words[2 * i] = prefill_common::fp8x2_to_bf16x2(in[i + 2] & 0xffffu, __NV_E4M3);
      hi_words[2 * i + 1] = prefill_common::fp8x2_to_bf16x2(in[i + 2] >> 16, __NV_E4M3);
    }
    *reinterpret_cast<uint4*>(k_wide + block_tile_offset(kBlockN, key, 2 * chunk)) = lo;
    *reinterpret_cast<uint4*>(k_wide + block_tile_offset(kBlockN, key, 2 * chunk + 1)) = hi;
  }
}

// bf16 wgmma with B of N rows (N = 64, 128 or 256), A from shared memory (SS) or registers.
template <int N>
__device__ __forceinline__ void wgmma_bf16_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                                              bool accumulate) {
  if constexpr (N == 64) {
    sm90::wgmma_m64n64k16_bf16_ss(d, desc_a, desc_b, accumulate);
  } else {
    static_assert(N == 128, "Q K^T tiles have 64 or 128 keys");
    sm90::wgmma_m64n128k16_bf16_ss(d, desc_a, desc_b, accumulate);
  }
}

template <int N>
__device__ __forceinline__ void wgmma_bf16_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                              uint64_t desc_b, bool accumulate) {
  if constexpr (N == 64) {
    sm90::wgmma_m64n64k16_bf16_rs(d, a, desc_b, accumulate);
  } else if constexpr (N == 128) {
    sm90::wgmma_m64n128k16_bf16_rs(d, a, desc_b, accumulate);
  } else {
    static_assert(N == 256, "P V covers head_dim 64, 128 or 256");
    sm90::wgmma_m64n256k16_bf16_rs(d, a, desc_b, accumulate);
  }
}

// The steps of one KV tile, shared by the kernel and the layout probe test
// (tests/ops/attention/prefill_hopper_layout_gpu_test.cu). Cfg is a HopperConfig.

// V as cached -> V^T operand (and, bf16 q over FP8 KV, K as cached -> widened K operand);
// returns the K operand. All threads of the CTA call it; the caller fences and syncs.
template <class Cfg>
__device__ __forceinline__ const unsigned char* prepare_kv_operands(const unsigned char* k_stage,
                                                                    const unsigned char* v_stage,
                                                                    unsigned char* k_wide,
                                                                    unsigned char* vt, int tid) {
  if constexpr (Cfg::kFp8Mma) {
    transpose_v_fp8<Cfg::kThreads>(v_stage, vt, tid);
  } else {
    transpose_v_bf16<Cfg::kThreads, Cfg::kFp8Kv, Cfg::kHeadDim, Cfg::kBlockN>(v_stage, vt, tid);
  }
  if constexpr (Cfg::kWidenK) {
    widen_k<Cfg::kThreads, Cfg::kHeadDim, Cfg::kBlockN>(k_stage, k_wide, tid);
    return k_wide;
  } else {
    return k_stage;
  }
}

// Issues S = Q K^T for one warpgroup (64 Q rows at q_address, see the kernel); the caller
// fences before and commits / waits after.
template <class Cfg>
__device__ __forceinline__ void issue_qk(float (&s)[Cfg::kBlockN / 2], uint32_t q_address,
                                         uint32_t k_address) {
#pragma unroll
  for (int ks = 0; ks < Cfg::kQkSteps; ++ks) {
    const uint64_t a = sm90::smem_descriptor_sw128(kstep_address(q_address, Cfg::kBlockM, ks));
    const uint64_t b = sm90::smem_descriptor_sw128(kstep_address(k_address, Cfg::kBlockN, ks));
    if constexpr (Cfg::kFp8Mma) {
      sm90::wgmma_m64n128k32_e4m3_ss(s, a, b, ks > 0);
    } else {
      wgmma_bf16_ss<Cfg::kBlockN>(s, a, b, ks > 0);
    }
  }
}

// P (the S registers after the softmax) -> the A fragments of P V.
template <class Cfg>
__device__ __forceinline__ void pack_p(const float (&s)[Cfg::kBlockN / 2],
                                       uint32_t (&p_frag)[Cfg::kPvSteps][4]) {
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = i % 2;
      if constexpr (Cfg::kFp8Mma) {
        // k32 step ks (keys 32ks..32ks+31): A register i holds row r = i % 2 at permuted k
        // positions 16(i/2) + 4t + 0..3 = keys 32ks + 16(i/2) + {2t, 2t+1, 2t+8, 2t+9}, i.e. S
        // column blocks nt = 4ks + 2(i/2) and nt + 1, elements 2r and 2r + 1.
        const int nt = 4 * ks + 2 * (i / 2);
        p_frag[ks][i] = pack_e4m3x4(
            s[4 * nt + 2 * r] * Cfg::kPScale, s[4 * nt + 2 * r + 1] * Cfg::kPScale,
            s[4 * (nt + 1) + 2 * r] * Cfg::kPScale, s[4 * (nt + 1) + 2 * r + 1] * Cfg::kPScale);
      } else {
        // k16 step ks (keys 16ks..16ks+15): the bf16 A fragment is the accumulator layout of S
        // column blocks 2ks (registers 0, 1: rows r = 0, 1) and 2ks + 1 (registers 2, 3).
        const int nt = 2 * ks + i / 2;
        p_frag[ks][i] = prefill_common::pack_bf16x2(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]);
      }
    }
  }
}

// Issues acc (+)= P V^T-operand: FP8 overwrites acc (the tile accumulator T), bf16 accumulates
// into O. The caller fences before and commits / waits after.
template <class Cfg>
__device__ __forceinline__ void issue_pv(float (&acc)[Cfg::kHeadDim / 2],
                                         const uint32_t (&p_frag)[Cfg::kPvSteps][4],
                                         uint32_t vt_address) {
#pragma unroll
  for (int ks = 0; ks < Cfg::kPvSteps; ++ks) {
    const uint64_t b = sm90::smem_descriptor_sw128(kstep_address(vt_address, Cfg::kHeadDim, ks));
    if constexpr (Cfg::kFp8Mma) {
      sm90::wgmma_m64n128k32_e4m3_rs(acc, p_frag[ks], b, ks > 0);
    } else {
      wgmma_bf16_rs<Cfg::kHeadDim>(acc, p_frag[ks], b, true);
    }
  }
}

#endif  // QUENCH_SM90A_ENABLED

template <HopperKind kKind, int kHeadDimT>
__global__ void __launch_bounds__(HopperConfig<kKind, kHeadDimT>::kThreads, 1)
    prefill_attention_hopper_kernel(const AttentionParams p) {
#ifdef QUENCH_SM90A_ENABLED
  using Cfg = HopperConfig<kKind, kHeadDimT>;
  using prefill_common::OutputTile;
  using prefill_common::pack_bf16x2;
  using prefill_common::query_row;
  using prefill_common::QueryRow;
  using prefill_generic::cp_async_16;
  constexpr int kHeadDim = Cfg::kHeadDim;
  constexpr int kBlockM = Cfg::kBlockM;
  constexpr int kBlockN = Cfg::kBlockN;
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kQkOrderBarrier = 1;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle works on shared addresses: align the window to the 1024-byte atom.
  const uint32_t raw_address = sm90::smem_address(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - raw_address % 1024u) % 1024u);
  unsigned char* q_tile = smem + Cfg::kQOffset;

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
  const int warpgroup = tid / 128;
  const int warp_in_group = tid % 128 / 32;
  const int lane = tid % 32;
  const int lane_group = lane / 4;  // accumulator row within the warp's 8-row half
  const int lane_in_group = lane % 4;

  // Query tile -> swizzled shared memory (column blocks of 128 bytes); rows past the chunk are
  // zero.
  constexpr int kQChunks = kHeadDim * Cfg::kMmaBytes / 16;
  for (int idx = tid; idx < kBlockM * kQChunks; idx += Cfg::kThreads) {
    const int row = idx / kQChunks;
    const int chunk = idx % kQChunks;
    const int m = m0 + row;
    const bool valid = m < rows;
    int64_t src = 0;
    if (valid) {
      const QueryRow qr = query_row(m, group, kv_head);
      src = (static_cast<int64_t>(q_begin + qr.token) * p.num_q_heads + qr.head) * kHeadDim *
                Cfg::kMmaBytes +
            chunk * 16;
    }
    cp_async_16(q_tile + block_tile_offset(kBlockM, row, chunk),
                static_cast<const unsigned char*>(p.q) + src, valid);
  }

  // K/V tile gather: key j of the tile comes from page block_table[j / page_size]. Keys at or
  // past kv_end are zero-filled so that masked lanes never multiply garbage (NaN) from V.
  const int32_t* pages = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;
  const auto load_kv_tile = [&](int kv0, int stage) {
    constexpr int kKvChunks = kHeadDim * Cfg::kKvBytes / 16;
    unsigned char* k_dst_tile = smem + Cfg::kKStageOffset + stage * Cfg::kStageBytes;
    unsigned char* v_dst_tile = smem + Cfg::kVStageOffset + stage * Cfg::kStageBytes;
    for (int idx = tid; idx < kBlockN * kKvChunks; idx += Cfg::kThreads) {
      const int row = idx / kKvChunks;
      const int chunk = idx % kKvChunks;
      const int j = kv0 + row;
      const bool valid = j < kv_end;
      int64_t src = 0;
      if (valid) {
        const int page = pages[j / p.kv.page_size];
        src = p.kv.offset(page, j % p.kv.page_size, kv_head, 0) * Cfg::kKvBytes + chunk * 16;
      }
      const int dst = block_tile_offset(kBlockN, row, chunk);
      cp_async_16(k_dst_tile + dst, static_cast<const unsigned char*>(p.k_cache) + src, valid);
      cp_async_16(v_dst_tile + dst, static_cast<const unsigned char*>(p.v_cache) + src, valid);
    }
    prefill_generic::cp_async_commit();
  };

  // Per-thread rows r = 0, 1: packed rows lane_group and lane_group + 8 of this warp.
  int row_pos[2];
  for (int r = 0; r < 2; ++r) {
    const int m = m0 + warpgroup * 64 + warp_in_group * 16 + lane_group + 8 * r;
    row_pos[r] = first_pos + min(m / group, q_len - 1);  // rows past the chunk: never stored
  }
  const float q_scale_eff = Cfg::kFp8Mma ? p.q_scale : 1.0f;
  const float score_scale = p.sm_scale * q_scale_eff * p.k_scale.at(kv_head);
  const float score_scale_log2 = score_scale * kLog2e;
  const bool soft_cap = p.logit_soft_cap > 0.0f;
  float o_acc[kHeadDim / 2] = {};  // O, accumulator layout: o_acc[4 * dt + 2 * r + c]
  // P V's A fragments and FP8 result T: with kDeferPv they stay in flight until the Q K^T
  // wait of the next tile (or the end of the loop).
  uint32_t p_frag[Cfg::kPvSteps][4];
  float t_acc[kHeadDim / 2];  // FP8 only; unused (and removed) for bf16 operands
  // After P V's wait: pin its registers, and (FP8) add T into O.
  const auto finish_pv = [&] {
    sm90::fence_registers(p_frag);
    if constexpr (Cfg::kFp8Mma) {
      sm90::fence_registers(t_acc);
#pragma unroll
      for (int i = 0; i < kHeadDim / 2; ++i)
        o_acc[i] += t_acc[i];
    } else {
      sm90::fence_registers(o_acc);
    }
  };
  float row_max[2] = {-INFINITY, -INFINITY};  // in log2 units (score * log2(e))
  float row_sum[2] = {0.0f, 0.0f};            // this thread's partial; quad-reduced at the end

  // This warpgroup's 64 Q rows start 64 * 128 bytes into each column block.
  const uint32_t q_address = sm90::smem_address(q_tile) + warpgroup * 64 * 128;

  if (num_kv_tiles > 0) load_kv_tile(kv_begin, 0);
  for (int tile = 0; tile < num_kv_tiles; ++tile) {
    const int kv0 = kv_begin + tile * kBlockN;
    const int stage = tile & 1;
    unsigned char* k_stage = smem + Cfg::kKStageOffset + stage * Cfg::kStageBytes;
    const unsigned char* v_stage = smem + Cfg::kVStageOffset + stage * Cfg::kStageBytes;
    prefill_generic::cp_async_wait_all();
    sm90::fence_proxy_async_shared();
    // The tile (and Q) visible to all; every warpgroup is done with the previous tile's Q K^T
    // (and P V, unless kDeferPv: then it may still read the other V^T buffer).
    __syncthreads();
    unsigned char* vt_tile = smem + Cfg::kVtOffset + tile % Cfg::kVtStages * Cfg::kOperandTileBytes;
    const uint32_t vt_address = sm90::smem_address(vt_tile);
    const unsigned char* k_operand =
        prepare_kv_operands<Cfg>(k_stage, v_stage, smem + Cfg::kKWideOffset, vt_tile, tid);
    sm90::fence_proxy_async_shared();
    if (tile + 1 < num_kv_tiles) load_kv_tile(kv0 + kBlockN, stage ^ 1);
    __syncthreads();  // V^T (and the widened K) complete

    // S = Q K^T for this warpgroup's 64 rows.
    const uint32_t k_address = sm90::smem_address(k_operand);
    float s[kBlockN / 2];
    // Warpgroup 1 issues its Q K^T after warpgroup 0's, so the tensor cores finish warpgroup 0
    // first and its softmax runs while warpgroup 1's Q K^T (then warpgroup 0's P V while
    // warpgroup 1's softmax) still computes: the two alternate instead of idling the tensor
    // cores together.
    if (warpgroup == 1) sm90::named_barrier_sync(kQkOrderBarrier, Cfg::kThreads);
    sm90::wgmma_fence();
    issue_qk<Cfg>(s, q_address, k_address);
    sm90::wgmma_commit_group();
    if (warpgroup == 0) sm90::named_barrier_arrive(kQkOrderBarrier, Cfg::kThreads);
    sm90::wgmma_wait_group<0>();  // with kDeferPv, also the previous tile's P V
    sm90::fence_registers(s);
    if constexpr (Cfg::kDeferPv) {
      if (tile > 0) finish_pv();
    }
    // Scale, soft-cap and mask (log2 units), then the online softmax update.
    const bool needs_mask =
        kv0 + kBlockN - 1 > pos_lo || (p.window_left >= 0 && kv0 < pos_hi - p.window_left);
#pragma unroll
    for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x;
        if (soft_cap) {
          x = p.logit_soft_cap * tanhf(s[4 * nt + e] * score_scale / p.logit_soft_cap) * kLog2e;
        } else {
          x = s[4 * nt + e] * score_scale_log2;
        }
        if (needs_mask) {
          const int j = kv0 + nt * 8 + 2 * lane_in_group + (e & 1);
          const int pos = row_pos[e / 2];
          if (j > pos || (p.window_left >= 0 && j < pos - p.window_left)) x = -INFINITY;
        }
        s[4 * nt + e] = x;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        tile_max = fmaxf(tile_max, fmaxf(s[4 * nt + 2 * r], s[4 * nt + 2 * r + 1]));
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row that has seen only masked keys keeps max -inf; subtract 0 to avoid inf - inf.
      const float offset = new_max == -INFINITY ? 0.0f : new_max;
      const float correction = exp2f(row_max[r] - offset);
      row_max[r] = new_max;
      row_sum[r] *= correction;
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        o_acc[4 * dt + 2 * r] *= correction;
        o_acc[4 * dt + 2 * r + 1] *= correction;
      }
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        s[4 * nt + 2 * r] = fast_exp2(s[4 * nt + 2 * r] - offset);
        s[4 * nt + 2 * r + 1] = fast_exp2(s[4 * nt + 2 * r + 1] - offset);
        row_sum[r] += s[4 * nt + 2 * r] + s[4 * nt + 2 * r + 1];
      }
    }

    // FP8: T = P V into the tile accumulator; bf16: O += P V.
    pack_p<Cfg>(s, p_frag);
    if constexpr (Cfg::kFp8Mma) {
      sm90::fence_registers(t_acc);
      sm90::wgmma_fence();
      issue_pv<Cfg>(t_acc, p_frag, vt_address);
    } else {
      sm90::fence_registers(o_acc);
      sm90::wgmma_fence();
      issue_pv<Cfg>(o_acc, p_frag, vt_address);
    }
    sm90::wgmma_commit_group();
    if constexpr (!Cfg::kDeferPv) {
      sm90::wgmma_wait_group<0>();
      finish_pv();
    }
  }
  if constexpr (Cfg::kDeferPv) {
    if (num_kv_tiles > 0) {  // the last tile's P V
      sm90::wgmma_wait_group<0>();
      finish_pv();
    }
  }

  // Epilogue: normalize (sinks join the denominator), apply v_scale and 1 / kPScale, write the
  // LSE, stage the fp32 rows in shared memory, then store them in the output dtype.
  __syncthreads();
  float* out_tile = reinterpret_cast<float*>(smem);
  const float v_scale = p.v_scale.at(kv_head);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = warpgroup * 64 + warp_in_group * 16 + lane_group + 8 * r;
    const int m = m0 + row;
    const QueryRow qr = query_row(m, group, kv_head);
    if (p.sinks != nullptr && m < rows) sum += exp2f(p.sinks[qr.head] * kLog2e - row_max[r]);
    const float factor = sum > 0.0f ? v_scale / (sum * Cfg::kPScale) : 0.0f;
    if (p.lse != nullptr && m < rows && lane_in_group == 0) {
      p.lse[static_cast<int64_t>(q_begin + qr.token) * p.num_q_heads + qr.head] =
          (row_max[r] + log2f(sum)) * 0.6931471805599453f;
    }
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      *reinterpret_cast<float2*>(out_tile + row * Cfg::kOutStride + dt * 8 + 2 * lane_in_group) =
          make_float2(o_acc[4 * dt + 2 * r] * factor, o_acc[4 * dt + 2 * r + 1] * factor);
    }
  }
  __syncthreads();
  prefill_common::store_output_tile<kHeadDim, kBlockM, Cfg::kThreads>(
      p, out_tile, Cfg::kOutStride, OutputTile{m0, rows, group, kv_head, q_begin}, tid);
#endif  // QUENCH_SM90A_ENABLED
}

}  // namespace quench::prefill_hopper
