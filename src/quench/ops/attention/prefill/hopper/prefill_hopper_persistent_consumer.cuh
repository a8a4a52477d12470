// The consumer warpgroups of the persistent Hopper prefill kernel
// (prefill_hopper_persistent_kernel.cuh): the warp-specialized consumers' tile loop and epilogue
// (prefill_hopper_ws_consumer.cuh) for each of the CTA's work items, with the next item's Q rows
// loaded under the current one (kEarlyNextQ) or its tail.
#pragma once

#include <cstdint>

#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_fragment_store.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_persistent_items.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_schedule.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_tile.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_config.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_consumer.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_ring.cuh"

namespace quench::prefill_hopper {

// Where Q K^T takes Q from registers (Tile::kQInRegisters: the 16-bit kinds at head_dim 64 and
// 128), the Q tile is free once an item's fragments are loaded, and the next item's rows load
// from then on, under the whole item; elsewhere every Q K^T reads the tile, and they load under
// the item's last P V and epilogue, which leaves that load's DRAM latency at the item boundary
// for short items to wait on. QUENCH_PREFILL_EARLY_NEXT_Q=0 (a build switch for A/B runs) loads
// them late everywhere.
#ifndef QUENCH_PREFILL_EARLY_NEXT_Q
#define QUENCH_PREFILL_EARLY_NEXT_Q 1
#endif
template <class Tile>
inline constexpr bool kEarlyNextQ = QUENCH_PREFILL_EARLY_NEXT_Q != 0 && Tile::kQInRegisters;

#ifdef QUENCH_SM90A_ENABLED

// Warpgroups 1 and 2 of the persistent kernel: ws_consumer's tile loop and epilogue for each
// work item of the CTA, g0 = the item's first tile in the CTA's ring sequence. ctid =
// threadIdx.x - 128 (0..255), c = ctid / 128. kSoftCap: p.logit_soft_cap > 0.
template <class Cfg, bool kSoftCap, bool kTwoTermPrev>
__device__ __forceinline__ void ws_persistent_consumer(const AttentionParams& p,
                                                       const WsItems& items, unsigned char* smem,
                                                       const WsRingBarriers& ring, int ctid) {
  using Tile = typename Cfg::Tile;
  using prefill_common::OutputTile;
  constexpr int kHeadDim = Tile::kHeadDim;
  constexpr int kBlockN = Tile::kBlockN;
  constexpr int kStages = Cfg::kStages;
  constexpr int kPScaleLog2 = Tile::kFp8Pv ? 8 : 0;
  static_assert(Tile::kPScale == static_cast<float>(1 << kPScaleLog2), "kPScale is 2^kPScaleLog2");
  const int consumer = ctid / 128;
  const int gtid = ctid % 128;  // thread within the warpgroup
  const int warp_in_group = gtid / 32;
  const int lane = gtid % 32;
  const int lane_group = lane / 4;  // accumulator row within the warp's 8-row half
  const int lane_in_group = lane % 4;
  unsigned char* q_tile = smem + Cfg::kQOffset;
  QOperand<Tile> q = q_operand_at<Tile>(q_tile, consumer);
  const auto slot_address = [&](int g) {
    return sm90::smem_address(smem + Cfg::kSlotOffset + g % kStages * Cfg::kSlotBytes);
  };
  uint32_t* held_p_lo = reinterpret_cast<uint32_t*>(smem + Cfg::kHeldPLoOffset);

  int item;
  {
    WsWork first;
    item = ws_next_item<Tile>(p, items, ws_before_first_item(), first);
    if (item < 0) return;
    ws_load_q_rows<Cfg>(p, first, q_tile, consumer, gtid);
    prefill_generic::cp_async_commit();
  }
  // Consumer 0 issues first: consumer 1 opens its barrier once for the whole CTA.
  if (Cfg::kPingPong && consumer == 1) {
    sm90_async::named_barrier_arrive(Cfg::kScheduleBarrier + 0, Cfg::kConsumerThreads);
  }

  // Registers are tight (FP8 P V: S, O, T and P across the tile loop in 240): what lives across
  // the loop is the item's index, the next one's, the tile count, kv_begin and the score
  // transform; the rest of the item's description is decoded again where it is needed (q_offsets
  // and seq_lens reads that hit L1).
  for (int g0 = 0; item >= 0;) {
    int next_item;
    {
      WsWork next;
      next_item = ws_next_item<Tile>(p, items, item, next);
    }
    int n_tiles;  // >= 1: every non-empty item sees its own key
    int kv_begin;
    ScoreTransform scores;
    {
      WsWork w;
      ws_decode_item<Tile>(p, items, item, w);
      n_tiles = w.num_kv_tiles;
      kv_begin = w.kv_begin;
      scores = ws_score_transform<Tile>(p, w, consumer, warp_in_group, lane_group, lane_in_group);
    }
    // This item's Q rows (loaded under the last item, see kEarlyNextQ) have landed.
    prefill_generic::cp_async_wait_all();
    scores.score_scale *= prepare_q_rows<Tile>(q_tile, consumer, gtid);
    sm90::fence_proxy_async_shared();
    sm90_async::named_barrier_sync(Cfg::kQReadyBarrier + consumer, 128);
    scores.score_scale *= load_q_fragments<Tile>(q, q_tile, consumer, gtid);  // two-term Q
    // The next item's Q rows, into the rows each warp has just read (load_q_fragments' __syncwarp
    // orders the reads first).
    const auto load_next_q_rows = [&]() {
      WsWork next;
      ws_decode_item<Tile>(p, items, next_item, next);
      // gtid as the compiler cannot see through: the Q rows' addresses are derived here
      // instead of hoisted out of the item loop (spilled at 240 registers, reloaded per item).
      int q_tid = gtid;
      asm volatile("" : "+r"(q_tid));
      ws_load_q_rows<Cfg>(p, next, q_tile, consumer, q_tid);
      prefill_generic::cp_async_commit();
    };
    if constexpr (kEarlyNextQ<Tile>) {
      if (next_item >= 0) load_next_q_rows();
    }

    // The state of ws_consumer, fresh for the item (see there).
    float o_acc[kHeadDim / 2] = {};
    float s[kBlockN / 2] = {};
    uint32_t p_frag[Tile::kPvSteps][4];
    uint32_t p_lo[Tile::kPvSteps][4];
    float correction[2] = {1.0f, 1.0f};
    float t_acc[kHeadDim / 2] = {};
    float o_correction[2] = {1.0f, 1.0f};
    float(&pv_acc)[kHeadDim / 2] = Tile::kFp8Pv ? t_acc : o_acc;
    float row_max[2] = {-INFINITY, -INFINITY};
    float row_sum[2] = {0.0f, 0.0f};

    const auto finish_deferred_pv = [&]() {
      ws_finish_deferred_pv<Tile>(o_acc, t_acc, pv_acc, p_frag, correction, o_correction);
    };

    // ws_consumer's iteration: finish P V of tile t - 2, S = Q K^T of tile t, P V of tile t - 1
    // under tile t's softmax (FP8 P V: the last one holds tile n - 2's second P term); kFirst
    // (kPeelFirstTile): tile 0 issuing its Q K^T alone (see there).
    const auto tile_step = [&](const int tile, auto first_tile) {
      constexpr bool kFirst = decltype(first_tile)::value;
      const int g = g0 + tile;
      if constexpr (!kFirst) {
        sm90::wgmma_wait_group<0>();
        finish_deferred_pv();
        if (tile > 1) sm90_async::mbarrier_arrive(&ring.v_empty[(g - 2) % kStages]);
        pack_p<Tile, true>(s, p_frag);
        if constexpr (Tile::kFp8Pv && kTwoTermPrev) {
          if (tile == n_tiles - 1) {
            hold_p_lo<Tile, Cfg::kConsumerThreads>(s, p_frag, held_p_lo, ctid);
          }
        }
      } else {
        ws_hold_first_p_lo<Cfg, kTwoTermPrev>(n_tiles, s, p_frag, held_p_lo, ctid);
      }

      const int kv0 = kv_begin + tile * kBlockN;
      const int slot = g % kStages;
      sm90_async::mbarrier_wait(&ring.full[slot], static_cast<uint32_t>((g / kStages) & 1));
      if constexpr (Cfg::kSplitFull && !kFirst) {
        // The V of this iteration's P V (the item's first tile's at its first tile).
        const int g_pv = tile > 0 ? g - 1 : g;
        sm90_async::mbarrier_wait(&ring.v_full[g_pv % kStages],
                                  static_cast<uint32_t>((g_pv / kStages) & 1));
      }

      if constexpr (Cfg::kPingPong) {
        sm90_async::named_barrier_sync(Cfg::kScheduleBarrier + consumer, Cfg::kConsumerThreads);
      }
      sm90::fence_registers(pv_acc);
      sm90::fence_registers(p_frag);
      sm90::wgmma_fence();
      issue_qk<Tile>(s, q, slot_address(g));
      sm90::wgmma_commit_group();
      if constexpr (!kFirst) {
        ws_issue_pv<Cfg>(
            pv_acc, p_frag,
            slot_address(tile > 0 ? g - 1 : g) + static_cast<uint32_t>(Cfg::kSlotKBytes));
        sm90::wgmma_commit_group();
      }
      // Consumer 1's last turn of the CTA would open a barrier that consumer 0 never waits on.
      if (Cfg::kPingPong && (consumer == 0 || tile + 1 < n_tiles || next_item >= 0)) {
        sm90_async::named_barrier_arrive(Cfg::kScheduleBarrier + (1 - consumer),
                                         Cfg::kConsumerThreads);
      }
      sm90::wgmma_wait_group<kFirst ? 0 : 1>();
      sm90::fence_registers(s);
      fence_q_operand<Tile>(q);
      sm90_async::mbarrier_arrive(&ring.k_empty[slot]);
      online_softmax_tile<kBlockN, kSoftCap, kPScaleLog2, kStaleMaxSixteenths<Tile>>(
          scores, kv0, s, row_max, row_sum, correction);
    };
    ws_run_tiles<kPeelFirstTile<Cfg, true>>(n_tiles, tile_step);
    // The last two P Vs; the producer reuses their slots for the next item, so both release V.
    // FP8 P V: tile n - 2's second P term first, tile n - 1's P two-term (ws_two_term_tail).
    const int g_last = g0 + n_tiles - 1;
    sm90::wgmma_wait_group<0>();
    if constexpr (Tile::kFp8Pv && kTwoTermPrev) {
      ws_two_term_tail<Cfg>(t_acc, p_frag, p_lo, held_p_lo, ctid,
                            slot_address(n_tiles > 1 ? g_last - 1 : g_last) +
                                static_cast<uint32_t>(Cfg::kSlotKBytes));
    }
    finish_deferred_pv();
    if (n_tiles > 1) sm90_async::mbarrier_arrive(&ring.v_empty[(g_last - 1) % kStages]);
    if constexpr (Cfg::kSplitFull) {
      sm90_async::mbarrier_wait(&ring.v_full[g_last % kStages],
                                static_cast<uint32_t>((g_last / kStages) & 1));
    }
    ws_issue_last_pv<Cfg>(s, pv_acc, p_frag, p_lo,
                          slot_address(g_last) + static_cast<uint32_t>(Cfg::kSlotKBytes));
    // Every Q K^T of this consumer is done: its Q rows take the next item's under this P V and
    // the epilogue (unless they already did: kEarlyNextQ).
    if (!kEarlyNextQ<Tile> && next_item >= 0) load_next_q_rows();
    sm90::wgmma_wait_group<0>();
    correction[0] = 1.0f;
    correction[1] = 1.0f;
    finish_deferred_pv();
    if constexpr (Tile::kFp8Pv) sm90::fence_registers(p_lo);
    sm90_async::mbarrier_arrive(&ring.v_empty[g_last % kStages]);

    // Epilogue: normalize (sinks join the denominator; O and the sum are both times kPScale),
    // apply v_scale, write the LSE, store from registers.
    WsWork w;
    ws_decode_item<Tile>(p, items, item, w);
    const float v_scale = p.v_scale.at(w.kv_head);
    float factor[2];
    int row_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_m[r] = w.m0 + consumer * 64 + warp_in_group * 16 + lane_group + 8 * r;
      factor[r] = ws_output_row_factor<Tile>(p, w, row_m[r], row_sum[r], row_max[r], v_scale,
                                             lane_in_group);
    }
    store_output_fragment<kHeadDim>(p, o_acc, factor, row_m,
                                    OutputTile{w.m0, w.rows, w.group, w.kv_head, w.q_begin},
                                    lane_in_group);
    g0 += n_tiles;
    item = next_item;
  }
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
