// The two consumer warpgroups of the warp-specialized Hopper prefill kernels
// (prefill_hopper_ws_kernel.cuh): Q rows into shared memory, S = Q K^T, the online softmax and
// P V per ring tile (prefill_hopper_tile.cuh's steps, in ping-pong turns with FA3's
// intra-warpgroup overlap), the FP8 P V two-level accumulation, and the output epilogue.
#pragma once

#include <cstdint>
#include <type_traits>

#include "quench/core/sm90_wgmma.cuh"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_fragment_store.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_tile.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_config.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_ring.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_work.cuh"
#include "quench/ops/attention/prefill/hopper/sm90_sync.cuh"
#include "quench/ops/attention/prefill/prefill_kernel_common.cuh"

namespace quench::prefill_hopper {

#ifdef QUENCH_SM90A_ENABLED

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

// Consumer `consumer`'s 64 query rows of work item w -> its rows of the swizzled Q tile (rows
// past the chunk are zero), by cp.async from its 128 threads (gtid 0..127); the caller commits,
// waits, fences for the async proxy and syncs the warpgroup before a wgmma reads them.
template <class Cfg>
__device__ __forceinline__ void ws_load_q_rows(const AttentionParams& p, const WsWork& w,
                                               unsigned char* q_tile, int consumer, int gtid) {
  using Tile = typename Cfg::Tile;
  using prefill_common::query_row;
  using prefill_common::QueryRow;
  constexpr int kHeadDim = Tile::kHeadDim;
  constexpr int kQChunks = kHeadDim * Tile::kQkBytes / 16;
  const auto load_chunk = [&](int idx) {
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
    prefill_generic::cp_async_16(q_tile + block_tile_offset(Tile::kBlockM, row, chunk),
                                 static_cast<const unsigned char*>(p.q) + src, valid);
  };
  if constexpr (Tile::kQRowsPerWarp) {
    for (int j = 0; j < kQChunks / 2; ++j)
      load_chunk(q_chunk_index<Tile>(gtid, j));
  } else {
    // q_chunk_index's stride, written as the loop the FP8 kernels' registers were tuned with.
    for (int idx = gtid; idx < 64 * kQChunks; idx += 128)
      load_chunk(idx);
  }
}

// The score transform of this thread's rows r = 0, 1 (packed rows lane_group and lane_group + 8
// of warp warp_in_group of consumer `consumer`) in work item w; rows past the chunk take its
// last position (they are never stored).
template <class Tile>
__device__ __forceinline__ ScoreTransform ws_score_transform(const AttentionParams& p,
                                                             const WsWork& w, int consumer,
                                                             int warp_in_group, int lane_group,
                                                             int lane_in_group) {
  int row_pos[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int m = w.m0 + consumer * 64 + warp_in_group * 16 + lane_group + 8 * r;
    row_pos[r] = w.first_pos + min(m / w.group, w.q_len - 1);
  }
  const float q_scale_eff = Tile::kFp8Qk ? p.q_scale : 1.0f;
  return ScoreTransform{p.sm_scale * q_scale_eff * p.k_scale.at(w.kv_head),
                        p.logit_soft_cap,
                        p.window_left,
                        w.pos_lo,
                        w.pos_hi,
                        {row_pos[0], row_pos[1]},
                        lane_in_group};
}

// The margin by which a row's running max may lag its true max in the consumers
// (online_softmax_tile's kStaleMaxSixteenths). 16-bit P: 8 in log2 units (P up to 2^8, exact in
// f16 and bf16 alike), so that most tiles of a row leave its max, and so O, alone: H100, against
// the exact max (bench/LOG.md, thirtieth session): bf16 +1.4% at 1k, +1.5% at 4k-8k, bf16 q over
// FP8 KV +2% at 8k. FP8 P (P * 256 in e4m3, whose largest is 448 = 2^8.8) keeps the exact max: a
// 0.75 margin with T joining O only every 2-8 tiles gave nothing (-1.5% at 1k).
template <class Tile>
inline constexpr int kStaleMaxSixteenths = Tile::kFp8Pv ? 0 : 8 * 16;

// Whether the consumers run an item's tile 0 as a copy of the loop body that issues its Q K^T
// alone. The loop's tile 0 issues a P V of zero P against tile 0's V, so that no branch sits
// around a wgmma: a whole P V of tensor work per item (at 1k tokens an item has ~4.5 tiles: ~18%
// of its P V work), which the copy saves at the price of its code. H100, TFLOP/s, unpeeled /
// peeled, two or three rounds (bench/LOG.md, forty-fifth session): FP8 P·V 1k page 16 391 / 401,
// 8k 727 / 738, 16k 753 / 759; bf16 q over FP8 KV 1k 309 / 318, 8k 534 / 538, head_dim 256 555 /
// 565; bf16 head_dim 256 658 / 683, head_dim 64 431 / 437; the bf16 persistent kernel at head_dim
// 128 1k 342 / 352 and even at 8k-16k; but the bf16 per-tile kernel at head_dim 128 590 / 581 at
// 8k and 626 / 611 at 16k (even at 1k-2k), so that one keeps the zero P V.
// QUENCH_PREFILL_PEEL_FIRST_TILE=0 (a build switch for A/B runs) keeps it everywhere.
#ifndef QUENCH_PREFILL_PEEL_FIRST_TILE
#define QUENCH_PREFILL_PEEL_FIRST_TILE 1
#endif
template <class Cfg, bool kPersistent>
inline constexpr bool kPeelFirstTile = QUENCH_PREFILL_PEEL_FIRST_TILE != 0 &&
                                       (kPersistent || Cfg::Tile::kFp8Kv ||
                                        Cfg::Tile::kHeadDim != 128);  // kFp8Kv false: bf16 KV

// Runs step(tile, first) over an item's tiles 0..n_tiles-1: tile 0 as the peeled copy
// (first = std::true_type) where kPeel, every other as the loop's (std::false_type). An item
// always has a tile (its rows see their own keys).
template <bool kPeel, class Step>
__device__ __forceinline__ void ws_run_tiles(int n_tiles, const Step& step) {
  int tile = 0;
  if constexpr (kPeel) {
    step(0, std::true_type{});
    tile = 1;
  }
  for (; tile < n_tiles; ++tile)
    step(tile, std::false_type{});
}

// The peeled tile 0 of a one-tile item (FP8 P V, kTwoTermPrev): the tail (ws_two_term_tail) adds
// the held second P term of "tile -1", zero as S still is, which the loop's tile 0 would hold.
template <class Cfg, bool kTwoTermPrev>
__device__ __forceinline__ void ws_hold_first_p_lo(int n_tiles,
                                                   const float (&s)[Cfg::Tile::kBlockN / 2],
                                                   uint32_t (&p_frag)[Cfg::Tile::kPvSteps][4],
                                                   uint32_t* held_p_lo, int ctid) {
  using Tile = typename Cfg::Tile;
  if constexpr (Tile::kFp8Pv && kTwoTermPrev) {
    if (n_tiles == 1) {
      pack_p<Tile, true>(s, p_frag);
      hold_p_lo<Tile, Cfg::kConsumerThreads>(s, p_frag, held_p_lo, ctid);
    }
  }
}

// Once the deferred P V is done: O takes it (FP8: O = O * o_correction + T, then o_correction
// becomes the last softmax's correction) and, for bf16, the last softmax's correction, skipped
// where no row of the warp changed its max (most tiles of a long row). pv_acc is t_acc for FP8
// P V, else o_acc.
template <class Tile>
__device__ __forceinline__ void ws_finish_deferred_pv(float (&o_acc)[Tile::kHeadDim / 2],
                                                      const float (&t_acc)[Tile::kHeadDim / 2],
                                                      float (&pv_acc)[Tile::kHeadDim / 2],
                                                      uint32_t (&p_frag)[Tile::kPvSteps][4],
                                                      const float (&correction)[2],
                                                      float (&o_correction)[2]) {
  sm90::fence_registers(p_frag);
  sm90::fence_registers(pv_acc);
  if constexpr (Tile::kFp8Pv) {
#pragma unroll
    for (int i = 0; i < Tile::kHeadDim / 2; ++i)
      o_acc[i] = fmaf(o_acc[i], o_correction[i % 4 / 2], t_acc[i]);
    o_correction[0] = correction[0];
    o_correction[1] = correction[1];
  } else if (__any_sync(0xffffffffu, correction[0] != 1.0f || correction[1] != 1.0f)) {
#pragma unroll
    for (int i = 0; i < Tile::kHeadDim / 2; ++i)
      o_acc[i] *= correction[i % 4 / 2];
  }
}

// FP8 P V rounds P to e4m3 (3 mantissa bits). A row that sees only a handful of keys then
// misses the SPEC FP8 prefill tolerance (by ~10%, seventh session): its few weights' rounding
// errors do not average out. An item's rows span at most 128 / group positions, and its last
// tile starts at L <= its last row's position, so every row's keys from L - 128 on lie in the
// item's last two tiles: that is all keys of a row over at most 128 keys from a sequence's start,
// while a row with keys before L - 128 sees at least a whole tile of them (L >= 256 puts every
// row of the item past position 128); with a sliding window, each row's most recent
// 129 - 128 / group keys at least. So those two tiles get P as two e4m3 terms, hi + lo (within
// 2^-8, bf16-class), and the others one. The tile loop keeps its shape (tile n - 2's P V runs
// one-term under tile n - 1's softmax); its last iteration also keeps tile n - 2's second term
// in shared memory (hold_p_lo: the registers are full there), the tail adds that term's P V to
// T before T joins O (ws_two_term_tail), then runs tile n - 1's P V two-term
// (pack_p_two_term). H200, against one-term P everywhere (bench/LOG.md, 2026-12-04): -3.5% at
// 8k-16k tokens, -7% at 1k, most of it in the loop's code (the hold branch moves the tile
// counter off the uniform datapath); peeling the last iteration instead (two-term P V
// serialized before its Q K^T) cost -1% at page 64 but -5% at page 16 and -10% at 1k. Where
// the last tile alone suffices (kTwoTermPrev false: GQA groups >= 2 without a sliding window,
// two_term_prev_tile in the launcher) there is no hold and the loop is the one-term loop:
// -1.3% to -3%.

// The tail's first step: with tile n - 2's one-term P V done into T (the caller waited), T +=
// P_lo V from the held second term. p_lo is scratch (pinned until the wait).
template <class Cfg>
__device__ __forceinline__ void ws_two_term_tail(float (&t_acc)[Cfg::Tile::kHeadDim / 2],
                                                 uint32_t (&p_frag)[Cfg::Tile::kPvSteps][4],
                                                 uint32_t (&p_lo)[Cfg::Tile::kPvSteps][4],
                                                 const uint32_t* held_p_lo, int ctid,
                                                 uint32_t vt_address) {
  using Tile = typename Cfg::Tile;
  static_assert(Tile::kFp8Pv, "two-term P is FP8 P V's");
  sm90::fence_registers(p_frag);
  load_held_p_lo<Tile, Cfg::kConsumerThreads>(held_p_lo, p_lo, ctid);
  sm90::fence_registers(t_acc);
  sm90::fence_registers(p_lo);
  sm90::wgmma_fence();
  issue_pv<Tile>(t_acc, p_lo, vt_address, /*accumulate_first=*/true);
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::fence_registers(p_lo);
  sm90::fence_registers(t_acc);
}

// The last tile's P V, from S (P after its softmax): packed two-term for FP8 P V (p_lo its
// second term, pinned by the caller after its wait), one-term otherwise; fenced, issued and
// committed (the caller waits).
template <class Cfg>
__device__ __forceinline__ void ws_issue_last_pv(const float (&s)[Cfg::Tile::kBlockN / 2],
                                                 float (&pv_acc)[Cfg::Tile::kHeadDim / 2],
                                                 uint32_t (&p_frag)[Cfg::Tile::kPvSteps][4],
                                                 uint32_t (&p_lo)[Cfg::Tile::kPvSteps][4],
                                                 uint32_t v_address) {
  using Tile = typename Cfg::Tile;
  if constexpr (Tile::kFp8Pv) {
    pack_p_two_term<Tile>(s, p_frag, p_lo);
  } else {
    pack_p<Tile, true>(s, p_frag);
  }
  sm90::fence_registers(pv_acc);
  sm90::fence_registers(p_frag);
  if constexpr (Tile::kFp8Pv) sm90::fence_registers(p_lo);
  sm90::wgmma_fence();
  if constexpr (Tile::kFp8Pv) {
    issue_pv_two_term<Tile>(pv_acc, p_frag, p_lo, v_address);
  } else {
    ws_issue_pv<Cfg>(pv_acc, p_frag, v_address);
  }
  sm90::wgmma_commit_group();
}

// The epilogue's factor for one accumulator row (packed row m of work item w): v_scale over the
// quad-reduced sum, the sink joining the denominator (O and the sum are both times kPScale);
// writes the row's LSE where asked. Zero for a row that saw no key.
template <class Tile>
__device__ __forceinline__ float ws_output_row_factor(const AttentionParams& p, const WsWork& w,
                                                      int m, float row_sum, float row_max,
                                                      float v_scale, int lane_in_group) {
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr int kPScaleLog2 = Tile::kFp8Pv ? 8 : 0;
  static_assert(Tile::kPScale == static_cast<float>(1 << kPScaleLog2), "kPScale is 2^kPScaleLog2");
  float sum = row_sum;
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  const prefill_common::QueryRow qr = prefill_common::query_row(m, w.group, w.kv_head);
  if (p.sinks != nullptr && m < w.rows) {
    sum += exp2f(p.sinks[qr.head] * kLog2e - row_max + static_cast<float>(kPScaleLog2));
  }
  if (p.lse != nullptr && m < w.rows && lane_in_group == 0) {
    p.lse[static_cast<int64_t>(w.q_begin + qr.token) * p.num_q_heads + qr.head] =
        (row_max + log2f(sum) - static_cast<float>(kPScaleLog2)) * 0.6931471805599453f;
  }
  return sum > 0.0f ? v_scale / sum : 0.0f;
}

// Warpgroups 1 and 2: attention of packed rows 64c..64c+63 over the ring's tiles, then the
// epilogue. ctid = threadIdx.x - 128 (0..255), c = ctid / 128. kSoftCap: p.logit_soft_cap > 0.
template <class Cfg, bool kSoftCap, bool kTwoTermPrev>
__device__ __forceinline__ void ws_consumer(const AttentionParams& p, const WsWork& w,
                                            unsigned char* smem, const WsRingBarriers& ring,
                                            int ctid) {
  using Tile = typename Cfg::Tile;
  using prefill_common::OutputTile;
  constexpr int kHeadDim = Tile::kHeadDim;
  constexpr int kBlockN = Tile::kBlockN;
  constexpr int kStages = Cfg::kStages;
  const int consumer = ctid / 128;
  const int gtid = ctid % 128;  // thread within the warpgroup
  const int warp_in_group = gtid / 32;
  const int lane = gtid % 32;
  const int lane_group = lane / 4;  // accumulator row within the warp's 8-row half
  const int lane_in_group = lane % 4;
  const int n_tiles = w.num_kv_tiles;

  unsigned char* q_tile = smem + Cfg::kQOffset;
  ws_load_q_rows<Cfg>(p, w, q_tile, consumer, gtid);
  prefill_generic::cp_async_commit();
  prefill_generic::cp_async_wait_all();
  // The warp's Q scale back (q_rows_to_f16, two-term Q).
  float q_factor = prepare_q_rows<Tile>(q_tile, consumer, gtid);
  sm90::fence_proxy_async_shared();
  sm90_async::named_barrier_sync(Cfg::kQReadyBarrier + consumer, 128);
  QOperand<Tile> q = q_operand_at<Tile>(q_tile, consumer);
  q_factor *= load_q_fragments<Tile>(q, q_tile, consumer, gtid);  // two-term Q: its 2^-e

  ScoreTransform scores =
      ws_score_transform<Tile>(p, w, consumer, warp_in_group, lane_group, lane_in_group);
  scores.score_scale *= q_factor;
  float o_acc[kHeadDim / 2] = {};      // O, accumulator layout: o_acc[4 * dt + 2 * r + c]
  float s[kBlockN / 2] = {};           // S, then P; zero: see the first P V below
  uint32_t p_frag[Tile::kPvSteps][4];  // P as P V's A fragments
  uint32_t p_lo[Tile::kPvSteps][4];    // two-term P's second term (FP8 P V, last two tiles)
  float correction[2] = {1.0f, 1.0f};  // the last softmax's correction of O
  // FP8 P V (two-level): tile t's P V lands in T, which joins O in fp32 once it is done, as
  // O = O * correction + T with the correction of tile t (O lags one tile behind the softmax
  // state). Unused (and removed) for bf16 P V, which accumulates into O directly.
  float t_acc[kHeadDim / 2] = {};
  float o_correction[2] = {1.0f, 1.0f};
  float(&pv_acc)[kHeadDim / 2] = Tile::kFp8Pv ? t_acc : o_acc;
  float row_max[2] = {-INFINITY, -INFINITY};  // in log2 units (score * log2(e))
  // This thread's partial, quad-reduced at the end; like P, times kPScale = 2^kPScaleLog2.
  float row_sum[2] = {0.0f, 0.0f};
  constexpr int kPScaleLog2 = Tile::kFp8Pv ? 8 : 0;
  static_assert(Tile::kPScale == static_cast<float>(1 << kPScaleLog2), "kPScale is 2^kPScaleLog2");

  const auto finish_deferred_pv = [&]() {
    ws_finish_deferred_pv<Tile>(o_acc, t_acc, pv_acc, p_frag, correction, o_correction);
  };
  const auto vt_address_of = [&](int tile) {
    return sm90::smem_address(smem + Cfg::kSlotOffset + tile % kStages * Cfg::kSlotBytes) +
           static_cast<uint32_t>(Cfg::kSlotKBytes);
  };

  // Consumer 0 issues first: consumer 1 opens its barrier once.
  if (Cfg::kPingPong && consumer == 1 && n_tiles > 0) {
    sm90_async::named_barrier_arrive(Cfg::kScheduleBarrier + 0, Cfg::kConsumerThreads);
  }
  uint32_t* held_p_lo = reinterpret_cast<uint32_t*>(smem + Cfg::kHeldPLoOffset);
  // Iteration t: finish P V of tile t - 2 and pack P of tile t - 1; S = Q K^T of tile t, and
  // P V of tile t - 1 (FA3's intra-warpgroup overlap), which runs under tile t's softmax. The
  // wait for that P V opens the next iteration: ptxas moves a wgmma wait to the start of its
  // basic block, and at the end of this one it would precede the softmax (no overlap left);
  // the loop's back edge keeps it after. Tile t - 2's V is released before the wait for tile
  // t's `full` (with two ring slots that wait needs it). kFirst (kPeelFirstTile): tile 0 as its
  // own copy of the body, issuing Q K^T alone.
  const auto tile_step = [&](const int tile, auto first_tile) {
    constexpr bool kFirst = decltype(first_tile)::value;
    if constexpr (!kFirst) {
      sm90::wgmma_wait_group<0>();
      finish_deferred_pv();
      if (tile > 1) sm90_async::mbarrier_arrive(&ring.v_empty[(tile - 2) % kStages]);
      pack_p<Tile, true>(s, p_frag);
      // FP8 P V: tile n - 2's second P term, for the tail (ws_two_term_tail).
      if constexpr (Tile::kFp8Pv && kTwoTermPrev) {
        if (tile == n_tiles - 1) hold_p_lo<Tile, Cfg::kConsumerThreads>(s, p_frag, held_p_lo, ctid);
      }
    } else {
      ws_hold_first_p_lo<Cfg, kTwoTermPrev>(n_tiles, s, p_frag, held_p_lo, ctid);
    }

    const int kv0 = w.kv_begin + tile * kBlockN;
    const int slot = tile % kStages;
    const uint32_t k_address = sm90::smem_address(smem + Cfg::kSlotOffset + slot * Cfg::kSlotBytes);
    sm90_async::mbarrier_wait(&ring.full[slot], static_cast<uint32_t>((tile / kStages) & 1));
    if constexpr (Cfg::kSplitFull && !kFirst) {
      // The V of this iteration's P V: tile t - 1's (tile 0's at tile 0, see below).
      const int pv_tile = max(tile - 1, 0);
      sm90_async::mbarrier_wait(&ring.v_full[pv_tile % kStages],
                                static_cast<uint32_t>((pv_tile / kStages) & 1));
    }

    // In turn with the other consumer (ping-pong), which may go once both GEMMs are issued.
    // Unpeeled, at tile 0 the P V is (O or T) += 0 * V of tile 0 (S zeroed; the producer leaves
    // V finite): the code has no branch around a wgmma, which would make the compiler serialize
    // every wgmma.
    if constexpr (Cfg::kPingPong) {
      sm90_async::named_barrier_sync(Cfg::kScheduleBarrier + consumer, Cfg::kConsumerThreads);
    }
    sm90::fence_registers(pv_acc);
    sm90::fence_registers(p_frag);
    sm90::wgmma_fence();
    issue_qk<Tile>(s, q, k_address);
    sm90::wgmma_commit_group();
    if constexpr (!kFirst) {
      ws_issue_pv<Cfg>(pv_acc, p_frag, vt_address_of(max(tile - 1, 0)));
      sm90::wgmma_commit_group();
    }
    // Consumer 1's last turn would open a barrier that consumer 0 never waits on again.
    if (Cfg::kPingPong && (consumer == 0 || tile + 1 < n_tiles)) {
      sm90_async::named_barrier_arrive(Cfg::kScheduleBarrier + (1 - consumer),
                                       Cfg::kConsumerThreads);
    }
    // Groups complete in order: with the P V group pending at most, Q K^T is done.
    sm90::wgmma_wait_group<kFirst ? 0 : 1>();
    sm90::fence_registers(s);
    fence_q_operand<Tile>(q);
    sm90_async::mbarrier_arrive(&ring.k_empty[slot]);
    online_softmax_tile<kBlockN, kSoftCap, kPScaleLog2, kStaleMaxSixteenths<Tile>>(
        scores, kv0, s, row_max, row_sum, correction);
  };
  ws_run_tiles<kPeelFirstTile<Cfg, false>>(n_tiles, tile_step);
  // The last P V (nobody waits for its slot any more); FP8 P V: tile n - 2's second term first,
  // and tile n - 1's P two-term. The last wait is unconditional so that the compiler sees every
  // path wait before O is read.
  if (n_tiles > 0) {
    sm90::wgmma_wait_group<0>();
    if constexpr (Tile::kFp8Pv && kTwoTermPrev) {
      ws_two_term_tail<Cfg>(t_acc, p_frag, p_lo, held_p_lo, ctid,
                            vt_address_of(max(n_tiles - 2, 0)));
    }
    finish_deferred_pv();
    if constexpr (Cfg::kSplitFull) {
      sm90_async::mbarrier_wait(&ring.v_full[(n_tiles - 1) % kStages],
                                static_cast<uint32_t>(((n_tiles - 1) / kStages) & 1));
    }
    ws_issue_last_pv<Cfg>(s, pv_acc, p_frag, p_lo, vt_address_of(n_tiles - 1));
  }
  sm90::wgmma_wait_group<0>();
  correction[0] = 1.0f;
  correction[1] = 1.0f;
  if (n_tiles > 0) finish_deferred_pv();
  if constexpr (Tile::kFp8Pv) sm90::fence_registers(p_lo);

  // Epilogue: normalize (sinks join the denominator; O and the sum are both times kPScale),
  // apply v_scale, write the LSE, store from registers (prefill_hopper_fragment_store.cuh). Each
  // consumer stores as soon as its last P V is done: staging the fp32 rows in shared memory
  // made the first consumer wait for the other at two CTA-wide barriers, and the SM had no other
  // CTA to run meanwhile (H200, bench/LOG.md eleventh session: FP8 P V 4k +3.5%, 8k +1-1.5%,
  // head_dim 64 / 256 bf16 +1.8%).
  const float v_scale = p.v_scale.at(w.kv_head);
  float factor[2];
  int row_m[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_m[r] = w.m0 + consumer * 64 + warp_in_group * 16 + lane_group + 8 * r;
    factor[r] =
        ws_output_row_factor<Tile>(p, w, row_m[r], row_sum[r], row_max[r], v_scale, lane_in_group);
  }
  store_output_fragment<kHeadDim>(p, o_acc, factor, row_m,
                                  OutputTile{w.m0, w.rows, w.group, w.kv_head, w.q_begin},
                                  lane_in_group);
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
