// The Hopper (sm_90a) prefill attention kernel on warpgroup MMA (wgmma), in four operand kinds
// (HopperKind): FP8 q over an FP8 cache with FP8 Q K^T and either 16-bit P V (f16 P, V widened
// exactly to f16 in shared memory; the default: 16-bit P keeps short rows within the SPEC
// tolerance) or FP8 P V with two-level accumulation; bf16 q over a bf16 cache; bf16 q over an
// FP8 cache (Q converted, K and V widened to f16). head_dim 128 for FP8 q; 64/128/256 for bf16
// q. The launcher runs it only where HopperHeadDim256Kernel::kSynchronous or
// QUENCH_PREFILL_HD256=sync asks (head_dim 256, the A/B baseline); every head_dim runs the
// warp-specialized kernels by default (prefill_hopper_ws_kernel.cuh,
// prefill_hopper_persistent_kernel.cuh).
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
//   FP8 two-level   each tile's FP8 P V goes into a zeroed accumulator T, then O = O + T in
//                   fp32 registers (O was scaled by the softmax correction before): FP8
//                   tensor-core accumulation (about 22 bits) is confined to one 128-key tile
//                   (SPEC §3). bf16 P V accumulates into O directly (fp32 on the tensor core)
//                   and stays in flight while the next tile is prepared (kDeferPv).
// The epilogue multiplies by v_scale / (P scale * denominator) and stores through the shared
// output epilogue (bf16, FP8, NVFP4), as the generic kernel does.
#pragma once

#include <cstdint>

#include "quench/core/sm90_async.cuh"
#include "quench/core/sm90_wgmma.cuh"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_tile.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

// kSoftCap must be p.logit_soft_cap > 0 (the launcher picks the instantiation).
template <HopperKind kKind, int kHeadDimT, bool kSoftCap>
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
  constexpr int kQChunks = kHeadDim * Cfg::kQkBytes / 16;
  for (int j = 0; j < kQChunks / 2; ++j) {
    const int idx = q_chunk_index<Cfg>(tid % 128, j);
    const int row = 64 * (tid / 128) + idx / kQChunks;
    const int chunk = idx % kQChunks;
    const int m = m0 + row;
    const bool valid = m < rows;
    int64_t src = 0;
    if (valid) {
      const QueryRow qr = query_row(m, group, kv_head);
      src = (static_cast<int64_t>(q_begin + qr.token) * p.num_q_heads + qr.head) * kHeadDim *
                Cfg::kQkBytes +
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
  const float q_scale_eff = Cfg::kFp8Qk ? p.q_scale : 1.0f;
  ScoreTransform scores{p.sm_scale * q_scale_eff * p.k_scale.at(kv_head),
                        p.logit_soft_cap,
                        p.window_left,
                        pos_lo,
                        pos_hi,
                        {row_pos[0], row_pos[1]},
                        lane_in_group};
  float o_acc[kHeadDim / 2] = {};  // O, accumulator layout: o_acc[4 * dt + 2 * r + c]
  // P V's A fragments and FP8 result T: with kDeferPv they stay in flight until the Q K^T
  // wait of the next tile (or the end of the loop).
  uint32_t p_frag[Cfg::kPvSteps][4];
  float t_acc[kHeadDim / 2];                  // FP8 P V only; unused (and removed) otherwise
  float row_max[2] = {-INFINITY, -INFINITY};  // in log2 units (score * log2(e))
  float row_sum[2] = {0.0f, 0.0f};            // this thread's partial; quad-reduced at the end
  QOperand<Cfg> q = q_operand_at<Cfg>(q_tile, warpgroup);

  if (num_kv_tiles > 0) load_kv_tile(kv_begin, 0);
  for (int tile = 0; tile < num_kv_tiles; ++tile) {
    const int kv0 = kv_begin + tile * kBlockN;
    const int stage = tile & 1;
    unsigned char* k_stage = smem + Cfg::kKStageOffset + stage * Cfg::kStageBytes;
    const unsigned char* v_stage = smem + Cfg::kVStageOffset + stage * Cfg::kStageBytes;
    prefill_generic::cp_async_wait_all();
    if constexpr (Cfg::kWidenK || Cfg::kQTwoTermInSmem) {
      if (tile == 0) scores.score_scale *= prepare_q_rows<Cfg>(q_tile, warpgroup, tid % 128);
    }
    sm90::fence_proxy_async_shared();
    // The tile (and Q) visible to all; every warpgroup is done with the previous tile's Q K^T
    // (and P V, unless kDeferPv: then it may still read the other V^T buffer).
    __syncthreads();
    unsigned char* vt_tile = smem + Cfg::kVtOffset + tile % Cfg::kVtStages * Cfg::kVtBytes;
    const uint32_t vt_address = sm90::smem_address(vt_tile);
    const unsigned char* k_operand =
        prepare_kv_operands<Cfg>(k_stage, v_stage, smem + Cfg::kKWideOffset, vt_tile, tid);
    sm90::fence_proxy_async_shared();
    if (tile + 1 < num_kv_tiles) load_kv_tile(kv0 + kBlockN, stage ^ 1);
    __syncthreads();  // V^T (and the widened K) complete

    // S = Q K^T for this warpgroup's 64 rows (Q fragments, where held in registers, reloaded
    // per tile: the first tile converts Q in place above).
    load_q_fragments<Cfg>(q, q_tile, warpgroup, tid % 128);
    const uint32_t k_address = sm90::smem_address(k_operand);
    float s[kBlockN / 2];
    // Warpgroup 1 issues its Q K^T after warpgroup 0's, so the tensor cores finish warpgroup 0
    // first and its softmax runs while warpgroup 1's Q K^T (then warpgroup 0's P V while
    // warpgroup 1's softmax) still computes: the two alternate instead of idling the tensor
    // cores together.
    if (warpgroup == 1) sm90_async::named_barrier_sync(kQkOrderBarrier, Cfg::kThreads);
    sm90::wgmma_fence();
    issue_qk<Cfg>(s, q, k_address);
    sm90::wgmma_commit_group();
    if (warpgroup == 0) sm90_async::named_barrier_arrive(kQkOrderBarrier, Cfg::kThreads);
    sm90::wgmma_wait_group<0>();  // with kDeferPv, also the previous tile's P V
    sm90::fence_registers(s);
    fence_q_operand<Cfg>(q);
    if constexpr (Cfg::kDeferPv) {
      if (tile > 0) finish_pv<Cfg>(p_frag, t_acc, o_acc);
    }
    // Scale, soft-cap and mask (log2 units), the online softmax update, then O rescaled.
    float correction[2];
    online_softmax_tile<kBlockN, kSoftCap>(scores, kv0, s, row_max, row_sum, correction);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int dt = 0; dt < kHeadDim / 8; ++dt) {
        o_acc[4 * dt + 2 * r] *= correction[r];
        o_acc[4 * dt + 2 * r + 1] *= correction[r];
      }
    }

    // FP8 P V: T = P V into the tile accumulator; bf16: O += P V.
    pack_p<Cfg>(s, p_frag);
    if constexpr (Cfg::kFp8Pv) {
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
      finish_pv<Cfg>(p_frag, t_acc, o_acc);
    }
  }
  if constexpr (Cfg::kDeferPv) {
    if (num_kv_tiles > 0) {  // the last tile's P V
      sm90::wgmma_wait_group<0>();
      finish_pv<Cfg>(p_frag, t_acc, o_acc);
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
