// The building blocks of the Hopper prefill kernel (prefill_attention_hopper_kernel.cuh), one
// KV tile's worth: the operand kinds' configuration (prefill_hopper_config.cuh), the swizzled tile
// layouts and operand-building copy passes (prefill_hopper_smem_tiles.cuh), the online softmax
// (prefill_hopper_softmax.cuh), and here the wgmma steps S = Q K^T, P -> A fragments, P V. Kept
// apart from the kernel so that the layout probe test
// (tests/ops/attention/prefill_hopper_layout_gpu_test.cu) runs exactly these steps on exact
// integer data.
#pragma once

#include <cstdint>

#include "quench/core/sm90_wgmma.cuh"
#include "quench/numerics/e4m3_two_term.cuh"
#include "quench/numerics/fp8.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_config.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_smem_tiles.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_softmax.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

#ifdef QUENCH_SM90A_ENABLED

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

// Two-term Q's power of two for a warp whose largest finite |q| has the bf16 bit pattern
// amax_bits: floor(log2(amax)) is the exponent field - 127, and e puts amax * 2^e in [128, 256).
// The clamp keeps 2^e and 2^-e normal floats (a warp of zeros or subnormals takes 2^64: its
// terms round to 0 or near it, as its scores are).
__device__ __forceinline__ int two_term_exponent(uint32_t amax_bits) {
  return amax_bits == 0 ? 0 : min(64, max(-120, 7 - (static_cast<int>(amax_bits >> 7) - 127)));
}

// amax_bits folded with the |bf16| bit patterns of word w's two finite halves (|bf16| patterns
// order as their values; Inf is 0x7f80, NaN above).
__device__ __forceinline__ uint32_t fold_finite_bf16x2_amax(uint32_t amax_bits, uint32_t w) {
  for (const uint32_t h : {w & 0x7fffu, w >> 16 & 0x7fffu}) {
    if (h < 0x7f80u) amax_bits = max(amax_bits, h);
  }
  return amax_bits;
}

// The warp's two-term scale from each lane's finite amax bits: up = 2^e scales q into the
// terms' range (two_term_exponent), down = 2^-e is the factor of the warp's raw scores.
struct TwoTermScale {
  float up;
  float down;
};
__device__ __forceinline__ TwoTermScale warp_two_term_scale(uint32_t lane_amax_bits) {
  const int e = two_term_exponent(__reduce_max_sync(0xffffffffu, lane_amax_bits));
  return {__int_as_float((127 + e) << 23), __int_as_float((127 - e) << 23)};
}

// Two-term Q in shared memory (Cfg::kQTwoTermInSmem, head_dim 256): the warp's 16 bf16 Q rows
// (q_chunk_index: lane l loaded chunk l, dims 8l..8l+7, of each row, after its cp.async wait)
// -> in place, each row [hi | lo] as 512 e4m3 bytes (dim d's hi at byte d, its lo at 256 + d),
// the split of load_q_fragments_two_term with the warp's power of two 2^e. Lane l's hi and lo
// land in chunks l / 2 and 16 + l / 2, which other lanes loaded: every lane reads its chunk of a
// row before any lane writes that row (__syncwarp). Returns 2^-e, the factor of the warp's raw
// scores. The caller fences for the async proxy and syncs the warpgroup before a wgmma reads it.
template <class Cfg>
__device__ __forceinline__ float q_rows_to_two_term(unsigned char* q_tile, int warpgroup,
                                                    int gtid) {
  static_assert(Cfg::kQTwoTermInSmem && Cfg::kQRowsPerWarp && Cfg::kHeadDim == 256,
                "two-term Q in shared memory: head_dim 256, one 16-byte chunk per lane and row");
  const int lane = gtid % 32;
  const int row0 = 64 * warpgroup + 16 * (gtid / 32);
  const auto chunk_at = [&](int row, int chunk) {
    return q_tile + block_tile_offset(Cfg::kBlockM, row0 + row, chunk);
  };
  uint32_t amax = 0;
#pragma unroll 4
  for (int row = 0; row < 16; ++row) {
    const uint4 v = *reinterpret_cast<const uint4*>(chunk_at(row, lane));
    for (const uint32_t w : {v.x, v.y, v.z, v.w})
      amax = fold_finite_bf16x2_amax(amax, w);
  }
  const TwoTermScale scale = warp_two_term_scale(amax);
  const auto scaled = [&](uint32_t bits) {
    return e4m3_two_term_input(__uint_as_float(bits << 16), scale.up);
  };
#pragma unroll 2
  for (int row = 0; row < 16; ++row) {
    const uint4 v = *reinterpret_cast<const uint4*>(chunk_at(row, lane));
    __syncwarp();
    uint32_t hi[2];
    uint32_t lo[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t w0 = half == 0 ? v.x : v.z;
      const uint32_t w1 = half == 0 ? v.y : v.w;
      const E4m3x2Terms t0 = e4m3x2_two_term(scaled(w0 & 0xffffu), scaled(w0 >> 16));
      const E4m3x2Terms t1 = e4m3x2_two_term(scaled(w1 & 0xffffu), scaled(w1 >> 16));
      hi[half] = static_cast<uint32_t>(t0.hi) | static_cast<uint32_t>(t1.hi) << 16;
      lo[half] = static_cast<uint32_t>(t0.lo) | static_cast<uint32_t>(t1.lo) << 16;
    }
    const int byte = (lane % 2) * 8;
    *reinterpret_cast<uint2*>(chunk_at(row, lane / 2) + byte) = make_uint2(hi[0], hi[1]);
    *reinterpret_cast<uint2*>(chunk_at(row, 16 + lane / 2) + byte) = make_uint2(lo[0], lo[1]);
  }
  return scale.down;
}

// The Q tile's rows, once loaded (and the caller's cp.async wait), in the form Q K^T reads:
// converted to f16 (q_rows_to_f16) or to two e4m3 terms (q_rows_to_two_term) where the kind
// needs it. Returns the factor of the warp's raw Q K^T scores (1 where nothing changes).
template <class Cfg>
__device__ __forceinline__ float prepare_q_rows(unsigned char* q_tile, int warpgroup, int gtid) {
  if constexpr (Cfg::kWidenK) {
    return q_rows_to_f16<Cfg>(q_tile, warpgroup, gtid);
  } else if constexpr (Cfg::kQTwoTermInSmem) {
    return q_rows_to_two_term<Cfg>(q_tile, warpgroup, gtid);
  } else {
    return 1.0f;
  }
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

// Two-term Q (Cfg::kQTwoTerm, see HopperConfig): this thread's A fragments of FP8 Q K^T from
// the warp's 16 bf16 Q rows, k32 step ks < head_dim / 32 holding hi and step ks + head_dim / 32 lo
// of the same elements (register i, byte v: row 16 * warp + lane / 4 + 8 * (i % 2), dim 32 ks + 16
// (i / 2) + 4 (lane % 4) + v, the wgmma layout of an 8-bit A). Returns 2^-e, the factor of the
// warp's raw scores. The warp's scale comes from its finite values; a NaN stays NaN in both terms,
// and an infinite q becomes NaN (e4m3 has no infinity, and its satfinite conversion would make it
// 448): either way a broken upstream value stays its own row's problem.
template <class Cfg>
__device__ __forceinline__ float load_q_fragments_two_term(uint32_t (&frag)[Cfg::kQkSteps][4],
                                                           const unsigned char* q_tile,
                                                           int warpgroup, int gtid) {
  static_assert(Cfg::kQTwoTerm && Cfg::kQInRegisters, "two-term Q of head_dim 64 or 128");
  constexpr int kTermSteps = Cfg::kQkSteps / 2;  // k32 steps of one term: head_dim / 32
  const int lane = gtid % 32;
  const int c = lane % 4;
  const int row0 = 64 * warpgroup + 16 * (gtid / 32) + lane / 4;
  uint2 raw[kTermSteps][4];  // [ks][i]: the four bf16 of register i of step ks
#pragma unroll
  for (int ks = 0; ks < kTermSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int chunk = 4 * ks + 2 * (i / 2) + c / 2;  // 16-byte chunk (8 bf16) of the row
      raw[ks][i] = *reinterpret_cast<const uint2*>(
          q_tile + block_tile_offset(Cfg::kBlockM, row0 + 8 * (i % 2), chunk) + (c % 2) * 8);
    }
  }
  // The rows are rewritten next by this warp's own lanes (the next item's cp.async).
  __syncwarp();
  uint32_t amax = 0;
#pragma unroll
  for (int ks = 0; ks < kTermSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      amax = fold_finite_bf16x2_amax(amax, raw[ks][i].x);
      amax = fold_finite_bf16x2_amax(amax, raw[ks][i].y);
    }
  }
  const TwoTermScale scale = warp_two_term_scale(amax);
  const auto scaled = [&](uint32_t bits) {
    return e4m3_two_term_input(__uint_as_float(bits << 16), scale.up);
  };
#pragma unroll
  for (int ks = 0; ks < kTermSteps; ++ks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t hi = 0;
      uint32_t lo = 0;
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        const uint32_t w = pair == 0 ? raw[ks][i].x : raw[ks][i].y;
        const E4m3x2Terms terms = e4m3x2_two_term(scaled(w & 0xffffu), scaled(w >> 16));
        hi |= static_cast<uint32_t>(terms.hi) << (16 * pair);
        lo |= static_cast<uint32_t>(terms.lo) << (16 * pair);
      }
      frag[ks][i] = hi;
      frag[ks + kTermSteps][i] = lo;
    }
  }
  return scale.down;
}

// Where Cfg::kQInRegisters, loads warpgroup `warpgroup`'s Q fragments from the Q tile (one
// ldmatrix.x4 per k step: its four 8x8 b16 matrices are rows 0-7 / 8-15 of the warp's 16 times
// the step's two 16-byte chunks, lane l addressing row l % 8 of matrix l / 8; two-term Q:
// load_q_fragments_two_term); nothing otherwise. Called by the warpgroup's 128 threads (gtid)
// once the rows are in their final form and visible to the warp (each warp reads only its own
// 16 rows), before the wgmma fence of the first Q K^T that reads them. Returns the factor of
// the warp's raw Q K^T scores that the fragments carry (1 but for two-term Q).
template <class Cfg>
__device__ __forceinline__ float load_q_fragments(QOperand<Cfg>& q, const unsigned char* q_tile,
                                                  int warpgroup, int gtid) {
  if constexpr (Cfg::kQTwoTerm && Cfg::kQInRegisters) {
    return load_q_fragments_two_term<Cfg>(q.frag, q_tile, warpgroup, gtid);
  } else if constexpr (Cfg::kQInRegisters) {
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
  return 1.0f;
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
  for (int issue = 0; issue < Cfg::kQkSteps; ++issue) {
    // Two-term Q: [hi | lo] against [K | K], Q's steps ks and ks + kQkSteps / 2 reading K's step
    // ks % (kQkSteps / 2). The lo steps go first: Hopper's FP8 tensor cores add each product
    // into the accumulator at reduced precision, truncated relative to the running sum (SPEC
    // 1.1), so the small lo products are summed while it is still small and only the hi half
    // is added at full magnitude; lo last doubled the truncation, which the head_dim 256 LSEs
    // showed (up to 0.03 low at 16 k steps).
    const int ks = Cfg::kQTwoTerm ? (issue + Cfg::kQkSteps / 2) % Cfg::kQkSteps : issue;
    const int k_step = Cfg::kQTwoTerm ? ks % (Cfg::kQkSteps / 2) : ks;
    const bool accumulate = issue > 0;
    const uint64_t b = sm90::descriptor_plus(b0, kstep_address(0, Cfg::kBlockN, k_step));
    if constexpr (Cfg::kQTwoTerm && Cfg::kQInRegisters) {
      sm90::wgmma_m64n128k32_e4m3_rs(s, q.frag[ks], b, accumulate);
    } else if constexpr (Cfg::kQInRegisters) {
      static_assert(!Cfg::kFp8Qk, "Q is held in registers for 16-bit Q K^T only");
      wgmma_16bit_rs<Cfg::kBlockN, false, Cfg::kWidenK>(s, q.frag[ks], b, accumulate);
    } else {
      const uint64_t a = sm90::descriptor_plus(a0, kstep_address(0, Cfg::kBlockM, ks));
      if constexpr (Cfg::kFp8Qk) {
        sm90::wgmma_m64n128k32_e4m3_ss(s, a, b, accumulate);
      } else if constexpr (Cfg::kQTwoTermInSmem) {
        static_assert(Cfg::kBlockN == 64, "two-term Q in shared memory meets 64-key tiles");
        sm90::wgmma_m64n64k32_e4m3_ss(s, a, b, accumulate);
      } else {
        wgmma_16bit_ss<Cfg::kBlockN, Cfg::kWidenK>(s, a, b, accumulate);
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
    const uint64_t b = sm90::descriptor_plus(b0, kstep_address(0, Cfg::kHeadDim, ks));
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
    const uint64_t b = sm90::descriptor_plus(b0, static_cast<uint32_t>(ks * 16 * 128));
    wgmma_16bit_rs<Cfg::kHeadDim, true, Cfg::kF16Pv>(o, p_frag[ks], b, true);
  }
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
