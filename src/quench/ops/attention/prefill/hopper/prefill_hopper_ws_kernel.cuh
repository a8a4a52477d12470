// The warp-specialized Hopper (sm_90a) prefill attention kernel (head_dim 64 and 128; the
// synchronous prefill_attention_hopper_kernel.cuh keeps head_dim 256). Same operand kinds,
// numerics and per-tile steps (prefill_hopper_tile.cuh) as the synchronous kernel; what changes
// is who does what, and when:
//
// One CTA of three warpgroups per (tile of 128 packed query rows, KV head, sequence).
//   producer  warpgroup 0 (setmaxnreg down): gathers each 128-key K/V tile page by page
//             through the block table with cp.async (K straight into its ring slot unless it
//             is widened, V into a private raw stage; two raw stages let the loads of
//             kPrefetchTiles tiles fly while an earlier tile is prepared), then builds the V^T
//             operand (and the widened K) into the slot, fences the generic writes for the
//             async proxy and arrives on the slot's `full` mbarrier. It waits on the slot's
//             `empty` mbarrier before reusing it. bf16 V as cached is P V's MN-major B
//             operand (kVMnMajor): it goes straight into the slot too, and nothing is built.
//   consumers warpgroups 1 and 2 (setmaxnreg up), packed rows 64c..64c+63 for consumer c:
//             wait `full`, S = Q K^T (wgmma SS), online softmax in registers, P V (wgmma RS),
//             arrive on `empty` once the wgmmas reading the slot have completed. Ping-pong:
//             consumer c issues its Q K^T only after the other consumer issued its own (two
//             named barriers), so one consumer's softmax runs under the other's GEMMs. bf16
//             P V of tile t is issued right after tile t + 1's Q K^T and runs under tile
//             t + 1's softmax (kDeferPv, FA3's intra-warpgroup overlap); FP8 P V (two-level,
//             T in 64 more registers) waits at once.
// Ring protocol (kStages slots, tile t in slot t % kStages, use k = t / kStages):
//   full[s]    128 producer arrivals; the consumer of tile t waits parity k & 1.
//   k_empty[s] 256 consumer arrivals once Q K^T has read the slot's K; v_empty[s] once P V has
//              read its V^T. The producer of tile t >= kStages waits parity (k-1) & 1 of
//              k_empty before loading K into the slot, and of v_empty before writing V^T: K
//              loads start while the previous P V still reads the slot's V^T. MN-major V
//              loads wait for both.
#pragma once

#include <cstdint>

#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_tile.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_config.cuh"
#include "quench/ops/attention/prefill/hopper/sm90_ptx.cuh"
#include "quench/ops/attention/prefill/hopper/sm90_sync.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

// The CTA's share of the problem: its query rows and the KV range they see.
struct WsWork {
  int seq;
  int kv_head;
  int group;      // q heads per KV head
  int q_begin;    // the sequence's first token in the batch
  int q_len;      // tokens of the chunk
  int rows;       // packed rows of the sequence (q_len * group)
  int m0;         // the CTA's first packed row
  int first_pos;  // absolute position of the chunk's token 0
  int pos_lo;     // lowest / highest absolute position among the CTA's rows
  int pos_hi;
  int kv_begin;  // first key (a multiple of kBlockN)
  int kv_end;    // one past the last key
  int num_kv_tiles;
};

// The ring's mbarriers, kStages each (see the protocol above).
struct WsRingBarriers {
  uint64_t* full;
  uint64_t* k_empty;
  uint64_t* v_empty;
};

#ifdef QUENCH_SM90A_ENABLED

// False when this CTA has no rows (the sequence is shorter than the grid's longest one).
template <class Tile>
__device__ __forceinline__ bool ws_work(const AttentionParams& p, WsWork& w) {
  w.seq = static_cast<int>(blockIdx.z);
  w.kv_head = static_cast<int>(blockIdx.y);
  w.group = p.num_q_heads / p.kv.num_kv_heads;
  w.q_begin = p.q_offsets[w.seq];
  w.q_len = p.q_offsets[w.seq + 1] - w.q_begin;
  const int seq_len = p.seq_lens[w.seq];
  w.rows = w.q_len * w.group;
  const int m_tiles = (w.rows + Tile::kBlockM - 1) / Tile::kBlockM;
  // blockIdx.x == 0 takes the last (most keys under causality) tile, so heavy CTAs start first.
  const int m_tile = m_tiles - 1 - static_cast<int>(blockIdx.x);
  if (m_tile < 0) return false;
  w.m0 = m_tile * Tile::kBlockM;
  w.first_pos = seq_len - w.q_len;
  w.pos_lo = w.first_pos + w.m0 / w.group;
  w.pos_hi = w.first_pos + min(w.q_len - 1, (w.m0 + Tile::kBlockM - 1) / w.group);
  w.kv_begin =
      p.window_left >= 0 ? max(0, w.pos_lo - p.window_left) / Tile::kBlockN * Tile::kBlockN : 0;
  w.kv_end = w.pos_hi + 1;
  w.num_kv_tiles = (w.kv_end - w.kv_begin + Tile::kBlockN - 1) / Tile::kBlockN;
  return true;
}

// Issues acc (+)= P V from the slot's V operand at `v_address` (V^T, or MN-major V as cached).
template <class Cfg>
__device__ __forceinline__ void ws_issue_pv(float (&acc)[Cfg::Tile::kHeadDim / 2],
                                            const uint32_t (&p_frag)[Cfg::Tile::kPvSteps][4],
                                            uint32_t v_address) {
  if constexpr (Cfg::kVMnMajor) {
    issue_pv_v_mn_major<typename Cfg::Tile>(acc, p_frag, v_address);
  } else {
    issue_pv<typename Cfg::Tile>(acc, p_frag, v_address);
  }
}

// Warpgroup 0: fills the ring. ptid = threadIdx.x (0..127).
template <class Cfg>
__device__ __forceinline__ void ws_producer(const AttentionParams& p, const WsWork& w,
                                            unsigned char* smem, const WsRingBarriers& ring,
                                            int ptid) {
  using Tile = typename Cfg::Tile;
  using prefill_generic::cp_async_16;
  constexpr int kBlockN = Tile::kBlockN;
  constexpr int kStages = Cfg::kStages;
  const int32_t* pages = p.block_table + static_cast<int64_t>(w.seq) * p.block_table_stride;
  const auto raw_stage = [&](int tile) {
    return smem + Cfg::kRawOffset + (tile & 1) * Cfg::kRawStageBytes;
  };
  const auto slot_k = [&](int tile) {
    return smem + Cfg::kSlotOffset + tile % kStages * Cfg::kSlotBytes;
  };
  // Each thread copies one fixed 16-byte chunk of every kRowStride-th row of a tile (128 is a
  // multiple of kKvChunks), so its destination advances by a constant (kRowStride is a multiple
  // of the swizzle's 8 rows) and its source costs a shuffle, a shift, a mask and two
  // multiply-adds per row: page_size is a power of two (16/32/64) and kv0 a multiple of kBlockN,
  // so no row needs a division, and a tile's pages are read from the block table once per warp.
  constexpr int kKvChunks = Tile::kHeadDim * Tile::kKvBytes / 16;
  static_assert(Cfg::kProducerThreads % kKvChunks == 0, "a thread keeps one chunk column");
  constexpr int kRowStride = Cfg::kProducerThreads / kKvChunks;
  static_assert(kRowStride % 8 == 0, "every row of a thread has the same swizzle phase");
  constexpr int kRowsPerThread = kBlockN / kRowStride;
  const int lane = ptid % 32;
  const int chunk = ptid % kKvChunks;
  const int first_row = ptid / kKvChunks;
  const int dst0 = block_tile_offset(kBlockN, first_row, chunk);
  const int page_shift = __ffs(p.kv.page_size) - 1;
  const int page_mask = p.kv.page_size - 1;
  const int64_t page_bytes = p.kv.page_elems() * Tile::kKvBytes;
  const int64_t token_bytes = p.kv.token_stride() * Tile::kKvBytes;
  const int64_t head_chunk_bytes = w.kv_head * p.kv.head_stride() * Tile::kKvBytes + chunk * 16;
  const auto* k_cache = static_cast<const unsigned char*>(p.k_cache) + head_chunk_bytes;
  const auto* v_cache = static_cast<const unsigned char*>(p.v_cache) + head_chunk_bytes;
  // Key kv0 + row comes from page block_table[(kv0 + row) >> page_shift]; rows at or past
  // kv_end are zero-filled (their address clamped to the last key) so that masked lanes never
  // multiply garbage (NaN) from V, and pages past kv_end are never read.
  const auto issue_loads = [&](int tile) {
    const int kv0 = w.kv_begin + tile * kBlockN;
    const int last_row = w.kv_end - 1 - kv0;
    // Lane l holds the tile's page l (a tile spans kBlockN >> page_shift <= 8 pages) where
    // that page holds a key before kv_end.
    const bool lane_reads = lane < (kBlockN >> page_shift) && lane <= (last_row >> page_shift);
    const int32_t lane_page = lane_reads ? pages[(kv0 >> page_shift) + lane] : 0;
    unsigned char* v_dst =
        (Cfg::kVMnMajor ? slot_k(tile) + Cfg::kSlotKBytes : raw_stage(tile)) + dst0;
    unsigned char* k_dst =
        (Tile::kWidenK ? raw_stage(tile) + Cfg::kRawKOffsetInStage : slot_k(tile)) + dst0;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int row = first_row + i * kRowStride;
      const int src_row = min(row, last_row);
      const int32_t page = __shfl_sync(0xffffffffu, lane_page, src_row >> page_shift);
      const int64_t src = page * page_bytes + (src_row & page_mask) * token_bytes;
      cp_async_16(k_dst + i * kRowStride * 128, k_cache + src, row <= last_row);
      cp_async_16(v_dst + i * kRowStride * 128, v_cache + src, row <= last_row);
    }
  };

  // Tiles 0 .. kPrefetch - 1 load at once (every slot starts empty); then tile t + kPrefetch
  // loads while tile t + 1 .. is prepared. One cp.async group per tile, empty past the last
  // tile, so that "all but the newest kPrefetch - 1 groups" is always tile t and before.
  constexpr int kPrefetch = Cfg::kPrefetchTiles;
  for (int tile = 0; tile < kPrefetch; ++tile) {
    if (tile < w.num_kv_tiles) issue_loads(tile);
    prefill_generic::cp_async_commit();
  }
  for (int tile = 0; tile < w.num_kv_tiles; ++tile) {
    prefill_generic::cp_async_wait_group<kPrefetch - 1>();
    // Every producer thread's share of the tile has landed (and, prefetching one tile, every
    // thread is done reading the raw stage that the next tile's loads overwrite).
    sm90::named_barrier_sync(Cfg::kProducerBarrier, Cfg::kProducerThreads);
    if constexpr (!Cfg::kVMnMajor) {
      unsigned char* k_slot = slot_k(tile);
      const unsigned char* raw = raw_stage(tile);
      if (tile >= kStages) {
        sm90_async::mbarrier_wait(&ring.v_empty[tile % kStages],
                                  static_cast<uint32_t>((tile / kStages - 1) & 1));
      }
      prepare_kv_operands<Tile, Cfg::kProducerThreads>(raw + Cfg::kRawKOffsetInStage, raw, k_slot,
                                                       k_slot + Cfg::kSlotKBytes, ptid);
    }
    // V^T, the widened K and the cp.async K (and MN-major V) are generic-proxy writes that
    // wgmma reads.
    sm90::fence_proxy_async_shared();
    sm90_async::mbarrier_arrive(&ring.full[tile % kStages]);
    // Prefetching two tiles, tile + 2 overwrites this tile's raw stage: every thread must be
    // done reading it.
    if constexpr (kPrefetch == 2 && !Cfg::kVMnMajor) {
      sm90::named_barrier_sync(Cfg::kProducerBarrier, Cfg::kProducerThreads);
    }
    const int next = tile + kPrefetch;
    if (next < w.num_kv_tiles) {
      if (next >= kStages) {
        const uint32_t parity = static_cast<uint32_t>((next / kStages - 1) & 1);
        sm90_async::mbarrier_wait(&ring.k_empty[next % kStages], parity);
        // MN-major V lands in the slot itself: P V of its previous tile must be done.
        if constexpr (Cfg::kVMnMajor)
          sm90_async::mbarrier_wait(&ring.v_empty[next % kStages], parity);
      }
      issue_loads(next);
    }
    prefill_generic::cp_async_commit();
  }
}

// Warpgroups 1 and 2: attention of packed rows 64c..64c+63 over the ring's tiles, then the
// epilogue. ctid = threadIdx.x - 128 (0..255), c = ctid / 128.
template <class Cfg>
__device__ __forceinline__ void ws_consumer(const AttentionParams& p, const WsWork& w,
                                            unsigned char* smem, const WsRingBarriers& ring,
                                            int ctid) {
  using Tile = typename Cfg::Tile;
  using prefill_common::OutputTile;
  using prefill_common::query_row;
  using prefill_common::QueryRow;
  using prefill_generic::cp_async_16;
  constexpr int kHeadDim = Tile::kHeadDim;
  constexpr int kBlockM = Tile::kBlockM;
  constexpr int kBlockN = Tile::kBlockN;
  constexpr int kStages = Cfg::kStages;
  constexpr float kLog2e = 1.4426950408889634f;
  const int consumer = ctid / 128;
  const int gtid = ctid % 128;  // thread within the warpgroup
  const int warp_in_group = gtid / 32;
  const int lane = gtid % 32;
  const int lane_group = lane / 4;  // accumulator row within the warp's 8-row half
  const int lane_in_group = lane % 4;
  const int n_tiles = w.num_kv_tiles;

  // This consumer's 64 query rows -> swizzled shared memory; rows past the chunk are zero.
  unsigned char* q_tile = smem + Cfg::kQOffset;
  constexpr int kQChunks = kHeadDim * Tile::kQkBytes / 16;
  for (int idx = gtid; idx < 64 * kQChunks; idx += 128) {
    const int row = 64 * consumer + idx / kQChunks;
    const int chunk = idx % kQChunks;
    const int m = w.m0 + row;
    const bool valid = m < w.rows;
    int64_t src = 0;
    if (valid) {
      const QueryRow qr = query_row(m, w.group, w.kv_head);
      src = (static_cast<int64_t>(w.q_begin + qr.token) * p.num_q_heads + qr.head) * kHeadDim *
                Tile::kQkBytes +
            chunk * 16;
    }
    cp_async_16(q_tile + block_tile_offset(kBlockM, row, chunk),
                static_cast<const unsigned char*>(p.q) + src, valid);
  }
  prefill_generic::cp_async_commit();
  prefill_generic::cp_async_wait_all();
  sm90::fence_proxy_async_shared();
  sm90::named_barrier_sync(Cfg::kQReadyBarrier + consumer, 128);
  const uint32_t q_address = sm90::smem_address(q_tile) + consumer * 64 * 128;

  // Per-thread rows r = 0, 1: packed rows lane_group and lane_group + 8 of this warp.
  int row_pos[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int m = w.m0 + consumer * 64 + warp_in_group * 16 + lane_group + 8 * r;
    row_pos[r] = w.first_pos + min(m / w.group, w.q_len - 1);  // rows past the chunk: unstored
  }
  const float q_scale_eff = Tile::kFp8Qk ? p.q_scale : 1.0f;
  const ScoreTransform scores{p.sm_scale * q_scale_eff * p.k_scale.at(w.kv_head),
                              p.logit_soft_cap,
                              p.window_left,
                              w.pos_lo,
                              w.pos_hi,
                              {row_pos[0], row_pos[1]},
                              lane_in_group};
  float o_acc[kHeadDim / 2] = {};             // O, accumulator layout: o_acc[4 * dt + 2 * r + c]
  uint32_t p_frag[Tile::kPvSteps][4] = {};    // zero: see the first P V below
  float t_acc[kHeadDim / 2];                  // FP8 P V only; unused (and removed) otherwise
  float row_max[2] = {-INFINITY, -INFINITY};  // in log2 units (score * log2(e))
  float row_sum[2] = {0.0f, 0.0f};            // this thread's partial; quad-reduced at the end

  const auto rescale_o = [&](const float(&correction)[2]) {
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        o_acc[4 * dt + 2 * r] *= correction[r];
        o_acc[4 * dt + 2 * r + 1] *= correction[r];
      }
    }
  };
  const auto vt_address_of = [&](int tile) {
    return sm90::smem_address(smem + Cfg::kSlotOffset + tile % kStages * Cfg::kSlotBytes) +
           static_cast<uint32_t>(Cfg::kSlotKBytes);
  };

  // Consumer 0 issues first: consumer 1 opens its barrier once.
  if (consumer == 1 && n_tiles > 0) {
    sm90::named_barrier_arrive(Cfg::kScheduleBarrier + 0, Cfg::kConsumerThreads);
  }
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int kv0 = w.kv_begin + tile * kBlockN;
    const int slot = tile % kStages;
    const uint32_t k_address = sm90::smem_address(smem + Cfg::kSlotOffset + slot * Cfg::kSlotBytes);
    sm90_async::mbarrier_wait(&ring.full[slot], static_cast<uint32_t>((tile / kStages) & 1));

    // In turn with the other consumer: S = Q K^T of this tile and, deferring, the previous
    // tile's O += P V (FA3's intra-warpgroup overlap: that P V runs under this softmax). At
    // tile 0 that P V is O += 0 * V^T of tile 0 (P zeroed, V finite as everywhere): the code
    // has no branch around a wgmma, which would make the compiler serialize every wgmma.
    float s[kBlockN / 2];
    sm90::named_barrier_sync(Cfg::kScheduleBarrier + consumer, Cfg::kConsumerThreads);
    if constexpr (Cfg::kDeferPv) {
      sm90::fence_registers(o_acc);
      sm90::fence_registers(p_frag);
    }
    sm90::wgmma_fence();
    issue_qk<Tile>(s, q_address, k_address);
    sm90::wgmma_commit_group();
    if constexpr (Cfg::kDeferPv) {
      ws_issue_pv<Cfg>(o_acc, p_frag, vt_address_of(max(tile - 1, 0)));
      sm90::wgmma_commit_group();
    }
    // Consumer 1's last turn would open a barrier that consumer 0 never waits on again.
    if (consumer == 0 || tile + 1 < n_tiles) {
      sm90::named_barrier_arrive(Cfg::kScheduleBarrier + (1 - consumer), Cfg::kConsumerThreads);
    }
    // Groups complete in order: with the P V group pending at most, Q K^T is done.
    sm90::wgmma_wait_group<Cfg::kDeferPv ? 1 : 0>();
    sm90::fence_registers(s);
    sm90_async::mbarrier_arrive(&ring.k_empty[slot]);
    float correction[2];
    online_softmax_tile<kBlockN>(scores, kv0, s, row_max, row_sum, correction);

    if constexpr (Cfg::kDeferPv) {
      sm90::wgmma_wait_group<0>();
      finish_pv<Tile>(p_frag, t_acc, o_acc);
      if (tile > 0) sm90_async::mbarrier_arrive(&ring.v_empty[(tile - 1) % kStages]);
      rescale_o(correction);
      pack_p<Tile>(s, p_frag);
    } else {
      // FP8: T = P V into the tile accumulator, then O = O * correction + T.
      rescale_o(correction);
      pack_p<Tile>(s, p_frag);
      sm90::fence_registers(t_acc);
      sm90::wgmma_fence();
      ws_issue_pv<Cfg>(t_acc, p_frag, vt_address_of(tile));
      sm90::wgmma_commit_group();
      sm90::wgmma_wait_group<0>();
      finish_pv<Tile>(p_frag, t_acc, o_acc);
      sm90_async::mbarrier_arrive(&ring.v_empty[slot]);
    }
  }
  if constexpr (Cfg::kDeferPv) {
    // The last tile's P V (nobody waits for its slot any more). The wait is unconditional so
    // that the compiler sees every path wait before O is read.
    if (n_tiles > 0) {
      sm90::fence_registers(o_acc);
      sm90::fence_registers(p_frag);
      sm90::wgmma_fence();
      ws_issue_pv<Cfg>(o_acc, p_frag, vt_address_of(n_tiles - 1));
      sm90::wgmma_commit_group();
    }
    sm90::wgmma_wait_group<0>();
    if (n_tiles > 0) finish_pv<Tile>(p_frag, t_acc, o_acc);
  }

  // Epilogue: normalize (sinks join the denominator), apply v_scale and 1 / kPScale, write the
  // LSE, stage the fp32 rows in shared memory (over Q and the ring: both consumers are past
  // their last wgmma, and the producer wrote nothing the consumers have not consumed), then
  // store them in the output dtype.
  sm90::named_barrier_sync(Cfg::kEpilogueBarrier, Cfg::kConsumerThreads);
  float* out_tile = reinterpret_cast<float*>(smem);
  const float v_scale = p.v_scale.at(w.kv_head);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = consumer * 64 + warp_in_group * 16 + lane_group + 8 * r;
    const int m = w.m0 + row;
    const QueryRow qr = query_row(m, w.group, w.kv_head);
    if (p.sinks != nullptr && m < w.rows) sum += exp2f(p.sinks[qr.head] * kLog2e - row_max[r]);
    const float factor = sum > 0.0f ? v_scale / (sum * Tile::kPScale) : 0.0f;
    if (p.lse != nullptr && m < w.rows && lane_in_group == 0) {
      p.lse[static_cast<int64_t>(w.q_begin + qr.token) * p.num_q_heads + qr.head] =
          (row_max[r] + log2f(sum)) * 0.6931471805599453f;
    }
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      *reinterpret_cast<float2*>(out_tile + row * Tile::kOutStride + dt * 8 + 2 * lane_in_group) =
          make_float2(o_acc[4 * dt + 2 * r] * factor, o_acc[4 * dt + 2 * r + 1] * factor);
    }
  }
  sm90::named_barrier_sync(Cfg::kEpilogueBarrier, Cfg::kConsumerThreads);
  prefill_common::store_output_tile<kHeadDim, kBlockM, Cfg::kConsumerThreads>(
      p, out_tile, Tile::kOutStride, OutputTile{w.m0, w.rows, w.group, w.kv_head, w.q_begin}, ctid);
}

#endif  // QUENCH_SM90A_ENABLED

template <HopperKind kKind, int kHeadDimT>
__global__ void __launch_bounds__(WsConfig<kKind, kHeadDimT>::kThreads, 1)
    prefill_attention_hopper_ws_kernel(const AttentionParams p) {
#ifdef QUENCH_SM90A_ENABLED
  using Cfg = WsConfig<kKind, kHeadDimT>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle works on shared addresses: align the window to the 1024-byte atom.
  const uint32_t raw_address = sm90::smem_address(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - raw_address % 1024u) % 1024u);
  WsWork w;
  if (!ws_work<typename Cfg::Tile>(p, w)) return;  // the whole CTA, before any barrier

  uint64_t* barriers = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  const WsRingBarriers ring{barriers, barriers + Cfg::kStages, barriers + 2 * Cfg::kStages};
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      sm90_async::mbarrier_init(&ring.full[s], Cfg::kProducerThreads);
      sm90_async::mbarrier_init(&ring.k_empty[s], Cfg::kConsumerThreads);
      sm90_async::mbarrier_init(&ring.v_empty[s], Cfg::kConsumerThreads);
    }
  }
  __syncthreads();

  const int tid = static_cast<int>(threadIdx.x);
  if (tid < Cfg::kProducerThreads) {
    sm90::warpgroup_release_registers<Cfg::kProducerRegisters>();
    ws_producer<Cfg>(p, w, smem, ring, tid);
  } else {
    sm90::warpgroup_claim_registers<Cfg::kConsumerRegisters>();
    ws_consumer<Cfg>(p, w, smem, ring, tid - Cfg::kProducerThreads);
  }
#endif  // QUENCH_SM90A_ENABLED
}

}  // namespace quench::prefill_hopper
