// The persistent warp-specialized Hopper (sm_90a) prefill kernel (head_dim 64/128/256): the
// roles, ring, per-tile steps and numerics of prefill_hopper_ws_kernel.cuh, but each CTA walks a
// list of work items instead of owning one, so the fixed cost of a work item
// (Q load, the first K/V round trip, the epilogue) overlaps the tensor-core work of its
// neighbours (FlashAttention-3's persistent design).
//
// Schedule (prefill_hopper_schedule.h): work items are (m tile rank, sequence, KV head), numbered
// group by group of (sequence, KV head) pairs, the heaviest items of a group first; by default
// groups whose K/V fits L2 (QUENCH_PREFILL_ITEM_GROUPS=all: one group of every pair). A group's
// items are dealt to the CTAs in rounds, in alternating directions for bf16 K/V (ws_item_after),
// in turn for FP8 K/V (ws_next_item); items whose sequence has fewer m tiles are empty and
// skipped. The host launches min(SM count, items) CTAs
// (or one per item: HopperSchedule::kOneItemPerCta) and passes the schedule's sizes (WsItems, a
// kernel argument). No host-side scan: every CTA decodes its items from q_offsets on the fly.
//
// The ring runs on across work items: tile index g counts the CTA's KV tiles over all its items
// (slot g % kStages, phases g / kStages), so the producer loads the next item's first tiles while
// the consumers still work on the current one's last. Each consumer warpgroup prefetches its 64
// Q rows of the next item (cp.async) right after its last Q K^T of the current one, so the load
// flies under the last P V and the epilogue; Q stays single-buffered (each consumer reads only its
// own rows). The epilogue stores from registers (prefill_hopper_fragment_store.cuh): the ring is
// not free for staging any more. The consumers' ping-pong (head_dim 128) also runs on across
// items: consumer 0 starts the next item's Q K^T while consumer 1 finishes the current one.
#pragma once

#include <cstdint>

#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_fragment_store.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_schedule.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_kernel.cuh"

namespace quench::prefill_hopper {

#ifdef QUENCH_SM90A_ENABLED

// Work item `item` of the schedule -> w; false when it is empty.
template <class Tile>
__device__ __forceinline__ bool ws_decode_item(const AttentionParams& p, const WsItems& items,
                                               int item, WsWork& w) {
  const int heads = p.kv.num_kv_heads;
  const WsItemCoordinates at =
      ws_item_coordinates(item, items.pairs, items.m_tiles, items.pairs_per_group);
  return ws_work_item<Tile>(p, items.group, at.rank, at.pair % heads, at.pair / heads, w);
}

// The CTA's first non-empty work item after `item` (ws_before_first_item() before the first),
// decoded into w; -1 when none is left. bf16 K/V deals the items in the snake order
// (ws_item_after); the FP8-KV kinds keep round robin (CTA b: items b, b + gridDim.x, ...) in
// code, not by the runtime flag: the snake's item arithmetic in their 24-register producers
// spilled, and FP8 P V lost 6% at 1k tokens (H200, bench/LOG.md eleventh session).
template <class Tile>
__device__ __forceinline__ int ws_next_item(const AttentionParams& p, const WsItems& items,
                                            int item, WsWork& w) {
  if constexpr (Tile::kFp8Kv) {
    for (item += static_cast<int>(gridDim.x); item < items.count;
         item += static_cast<int>(gridDim.x)) {
      if (ws_decode_item<Tile>(p, items, item, w)) return item;
    }
  } else {
    const int cta = static_cast<int>(blockIdx.x);
    const int ctas = static_cast<int>(gridDim.x);
    for (item = ws_item_after(item, cta, ctas, items); item >= 0;
         item = ws_item_after(item, cta, ctas, items)) {
      if (ws_decode_item<Tile>(p, items, item, w)) return item;
    }
  }
  return -1;
}

// Negative, as ws_item_after wants it, and one round before CTA b's first round-robin item b.
__device__ __forceinline__ int ws_before_first_item() {
  return static_cast<int>(blockIdx.x) - static_cast<int>(gridDim.x);
}

// A position in the CTA's sequence of KV tiles: tile `tile` of work item `item` (-1: past the
// last).
template <class Tile>
struct WsTileCursor {
  int item;
  int tile;
  WsWork w;

  __device__ __forceinline__ void start(const AttentionParams& p, const WsItems& items) {
    tile = 0;
    item = ws_next_item<Tile>(p, items, ws_before_first_item(), w);
  }
  __device__ __forceinline__ void advance(const AttentionParams& p, const WsItems& items) {
    if (++tile < w.num_kv_tiles) return;
    tile = 0;
    item = ws_next_item<Tile>(p, items, item, w);
  }
  __device__ __forceinline__ bool valid() const { return item >= 0; }
};

// A raw-stage loading warp's cursor, kept in shared memory (WsConfig::kLoadCursorOffset, one per
// producer warp) between the warp's turns: the next tile to load, tile `tile` of work item
// `item`, and what loading it needs of the item. item is -1 past the last tile, kEndMarked once
// the warp has passed the end (warp 0 hands the builders the end mark).
struct WsLoadCursor {
  static constexpr int kEndMarked = -2;
  int item;
  int tile;
  int seq;
  int kv_head;
  int kv_begin;
  int kv_end;
};

// Warpgroup 0 of the persistent kernel: ws_producer's protocol over the CTA's tiles of all its
// work items, g counting them (see the file comment), issued by warp 0 or, where
// ws_spread_loads says so, by all four warps, each walking the tiles with its own cursor.
// Direct-V kinds: warp 0 alone loads an item's partial last tile, and the tail barrier completes
// once per such tile, so its phase is the count of tails so far. Raw-stage kinds: the issuing
// warps keep kPrefetchTiles tiles in flight ahead of the one being built, across item boundaries
// (second cursors, in shared memory).
template <class Cfg>
__device__ __forceinline__ void ws_persistent_producer(const AttentionParams& p,
                                                       const KvTensorMaps& maps,
                                                       const WsItems& items, unsigned char* smem,
                                                       const WsRingBarriers& ring, int ptid) {
  using Tile = typename Cfg::Tile;
  constexpr int kBlockN = Tile::kBlockN;
  constexpr int kStages = Cfg::kStages;
  const int warp = ptid / 32;
  const int lane = ptid % 32;
  const auto pages_of = [&](const WsWork& w) {
    return p.block_table + static_cast<int64_t>(w.seq) * p.block_table_stride;
  };
  const auto slot_k = [&](int g) {
    return smem + Cfg::kSlotOffset + g % kStages * Cfg::kSlotBytes;
  };
  const auto raw_stage = [&](int g) { return smem + Cfg::raw_stage_offset(g); };
  const auto empty_parity = [](int g) { return static_cast<uint32_t>((g / kStages - 1) & 1); };
  const auto valid_keys_of = [&](const WsWork& w, int tile) {
    return min(kBlockN, w.kv_end - (w.kv_begin + tile * kBlockN));
  };

  const bool spread = ws_spread_loads<kBlockN>(p);
  if constexpr (Cfg::kVDirect) {
    if (!spread && warp != 0) return;
    const int page = ws_load_page(spread, warp, lane);
    WsTileCursor<Tile> at;
    at.start(p, items);
    uint32_t tails = 0;
    for (int g = 0; at.valid(); ++g, at.advance(p, items)) {
      const int slot = g % kStages;
      if constexpr (!Cfg::kSplitFull) {
        if (g >= kStages) {
          sm90_async::mbarrier_wait(&ring.k_empty[slot], empty_parity(g));
          sm90_async::mbarrier_wait(&ring.v_empty[slot], empty_parity(g));
        }
      }
      const int valid_keys = valid_keys_of(at.w, at.tile);
      const bool tail = valid_keys < kBlockN;
      unsigned char* k_dst = slot_k(g);
      unsigned char* v_dst = k_dst + Cfg::kSlotKBytes;
      const int tile_page = tail ? ws_load_page(false, warp, lane) : page;
      if constexpr (Cfg::kSplitFull) {
        // K once its slot's K is free, V once its V is (ws_producer's protocol).
        const WsTileLoad load{k_dst, v_dst, &ring.full[slot],
                              tail ? ring.tail : &ring.v_full[slot]};
        if (g >= kStages) sm90_async::mbarrier_wait(&ring.k_empty[slot], empty_parity(g));
        ws_issue_tile_loads<Cfg, true, false>(p, maps, at.w, pages_of(at.w), at.tile, load,
                                              tile_page);
        if (g >= kStages) sm90_async::mbarrier_wait(&ring.v_empty[slot], empty_parity(g));
        ws_issue_tile_loads<Cfg, false, true>(p, maps, at.w, pages_of(at.w), at.tile, load,
                                              tile_page);
      } else {
        uint64_t* barrier = tail ? ring.tail : &ring.full[slot];
        ws_issue_tile_loads<Cfg>(p, maps, at.w, pages_of(at.w), at.tile,
                                 {k_dst, v_dst, barrier, barrier}, tile_page);
      }
      if (tail && warp == 0) {
        sm90_async::mbarrier_wait(ring.tail, tails & 1u);
        ++tails;
        ws_zero_rows<kBlockN, Cfg::kKvBoxes * 8, 32>(v_dst, valid_keys, lane);
        sm90::fence_proxy_async_shared();
        __syncwarp();
        if (lane == 0) sm90_async::mbarrier_arrive(&ring.v_full[slot]);
      }
    }
  } else {
    // The issuing warps load, kPrefetchTiles tiles ahead of the one being built; with each tile
    // warp 0 writes the tile's valid keys into raw_keys[g & 1] before the raw stage's
    // arrive.expect_tx (the builders' wait acquires it), and after the last tile a 0 with a plain
    // arrive. So the builders keep no cursor of their own. The issuing warps build too
    // (transpose_v_fp8 takes four warps), and their load cursors live in shared memory between
    // their turns: carried in registers across the build one spilled at 24 registers (FP8 P V,
    // 78-98 bytes, local loads and stores in the tile loop). Each turn reads the warp's cursor
    // (the barriers between turns are memory clobbers, so nothing of it stays live across them)
    // and lane 0 writes it back.
    constexpr int kPrefetch = Cfg::kPrefetchTiles;
    int* raw_keys = reinterpret_cast<int*>(smem + Cfg::kRawKeysOffset);
    static_assert(4 * sizeof(WsLoadCursor) <= Cfg::kLoadCursorBytes, "see WsConfig");
    const auto cursor_of = [&](int load_warp) {
      return reinterpret_cast<WsLoadCursor*>(smem + Cfg::kLoadCursorOffset) + load_warp;
    };
    // Lane 0 moves the cursor to item `item`'s first tile (w decoded; -1: none left).
    const auto start_item = [&](WsLoadCursor* cursor, int item, const WsWork& w, int load_lane) {
      if (load_lane != 0) return;
      cursor->item = item;
      cursor->tile = 0;
      if (item < 0) return;
      cursor->seq = w.seq;
      cursor->kv_head = w.kv_head;
      cursor->kv_begin = w.kv_begin;
      cursor->kv_end = w.kv_end;
    };
    // Loads the calling thread's share of tile `loaded` (the CTA's g) at its warp's cursor, or the
    // end mark after the last tile, and moves the cursor on. Every field is read where it is
    // used: nothing of the cursor is live across a turn. load_tid: the producer thread (0..127).
    const auto issue_next = [&](int loaded, int load_tid) {
      const int load_lane = load_tid % 32;
      const int page = ws_load_page(ws_spread_loads<kBlockN>(p), load_tid / 32, load_lane);
      WsLoadCursor* cursor = cursor_of(load_tid / 32);
      const int item = cursor->item;
      if (item == WsLoadCursor::kEndMarked) return;
      unsigned char* raw = raw_stage(loaded);
      uint64_t* raw_full = &ring.raw_full[loaded & 1];
      if (item < 0) {
        __syncwarp();  // every lane has read the cursor before lane 0 overwrites it
        if (load_lane == 0) cursor->item = WsLoadCursor::kEndMarked;
        if (page == 0) {
          raw_keys[loaded & 1] = 0;
          sm90_async::mbarrier_arrive(raw_full);
        }
        __syncwarp();
        return;
      }
      const int tile = cursor->tile;
      WsWork w;  // the fields ws_issue_tile_loads reads
      w.kv_head = cursor->kv_head;
      w.kv_begin = cursor->kv_begin;
      w.kv_end = cursor->kv_end;
      const int32_t* pages =
          p.block_table + static_cast<int64_t>(cursor->seq) * p.block_table_stride;
      __syncwarp();  // every lane has read the cursor before lane 0 overwrites it
      if (page == 0) raw_keys[loaded & 1] = valid_keys_of(w, tile);
      if constexpr (Cfg::kKDirect) {
        const int slot = loaded % kStages;
        if (loaded >= kStages) {
          sm90_async::mbarrier_wait(&ring.k_empty[slot], empty_parity(loaded));
        }
        ws_issue_tile_loads<Cfg>(p, maps, w, pages, tile,
                                 {slot_k(loaded), raw, &ring.full[slot], raw_full}, page);
      } else {
        ws_issue_tile_loads<Cfg>(p, maps, w, pages, tile,
                                 {raw + Cfg::kRawKOffsetInStage, raw, raw_full, raw_full}, page);
      }
      if (w.kv_begin + (tile + 1) * kBlockN < w.kv_end) {
        if (load_lane == 0) cursor->tile = tile + 1;
      } else {
        WsWork next;
        start_item(cursor, ws_next_item<Tile>(p, items, item, next), next, load_lane);
      }
      __syncwarp();
    };
    if (spread || warp == 0) {
      WsWork first;
      start_item(cursor_of(warp), ws_next_item<Tile>(p, items, ws_before_first_item(), first),
                 first, lane);
      __syncwarp();
      for (int i = 0; i < kPrefetch; ++i)
        issue_next(i, ptid);
    }
    for (int g = 0;; ++g) {
      // ptid as the compiler cannot see through: the thread's addresses (transpose rows, page
      // offsets) are derived again for each tile, a few integer ops, instead of hoisted out of
      // the loop and spilled around warp 0's loads.
      int tid = ptid;
      asm volatile("" : "+r"(tid));
      const int slot = g % kStages;
      unsigned char* raw = raw_stage(g);
      sm90_async::mbarrier_wait(&ring.raw_full[g & 1], static_cast<uint32_t>((g >> 1) & 1));
      const int valid_keys = raw_keys[g & 1];
      if (valid_keys == 0) break;
      if (valid_keys < kBlockN) {
        // An item's last tile: raw V rows past kv_end become zeros before anything reads them.
        ws_zero_rows<kBlockN, Cfg::kKvBoxes * 8, Cfg::kProducerThreads>(raw, valid_keys, tid);
        sm90_async::named_barrier_sync(Cfg::kProducerBarrier, Cfg::kProducerThreads);
      }
      if (g >= kStages) sm90_async::mbarrier_wait(&ring.v_empty[slot], empty_parity(g));
      ws_build_operands<Cfg>(raw, slot_k(g), tid);
      // The built operands are generic-proxy writes that wgmma reads.
      sm90::fence_proxy_async_shared();
      sm90_async::mbarrier_arrive(&ring.full[slot]);
      // Every producer thread is done reading g's raw stage (and raw_keys[g & 1]) before the
      // issuers load into it again (with one raw stage: tile g + 1, just below).
      sm90_async::named_barrier_sync(Cfg::kProducerBarrier, Cfg::kProducerThreads);
      if (ws_spread_loads<kBlockN>(p) || tid / 32 == 0) issue_next(g + kPrefetch, tid);
    }
  }
}

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
    // This item's Q rows (prefetched under the last item's epilogue) have landed.
    prefill_generic::cp_async_wait_all();
    if constexpr (Tile::kWidenK) scores.score_scale *= q_rows_to_f16<Tile>(q_tile, consumer, gtid);
    sm90::fence_proxy_async_shared();
    sm90_async::named_barrier_sync(Cfg::kQReadyBarrier + consumer, 128);
    load_q_fragments<Tile>(q, q_tile, consumer, gtid);

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
    // under tile t's softmax (FP8 P V: the last one holds tile n - 2's second P term).
    for (int tile = 0; tile < n_tiles; ++tile) {
      const int g = g0 + tile;
      sm90::wgmma_wait_group<0>();
      finish_deferred_pv();
      if (tile > 1) sm90_async::mbarrier_arrive(&ring.v_empty[(g - 2) % kStages]);
      pack_p<Tile, true>(s, p_frag);
      if constexpr (Tile::kFp8Pv && kTwoTermPrev) {
        if (tile == n_tiles - 1) {
          hold_p_lo<Tile, Cfg::kConsumerThreads>(s, p_frag, held_p_lo, ctid);
        }
      }

      const int kv0 = kv_begin + tile * kBlockN;
      const int slot = g % kStages;
      sm90_async::mbarrier_wait(&ring.full[slot], static_cast<uint32_t>((g / kStages) & 1));
      if constexpr (Cfg::kSplitFull) {
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
      ws_issue_pv<Cfg>(
          pv_acc, p_frag,
          slot_address(tile > 0 ? g - 1 : g) + static_cast<uint32_t>(Cfg::kSlotKBytes));
      sm90::wgmma_commit_group();
      // Consumer 1's last turn of the CTA would open a barrier that consumer 0 never waits on.
      if (Cfg::kPingPong && (consumer == 0 || tile + 1 < n_tiles || next_item >= 0)) {
        sm90_async::named_barrier_arrive(Cfg::kScheduleBarrier + (1 - consumer),
                                         Cfg::kConsumerThreads);
      }
      sm90::wgmma_wait_group<1>();
      sm90::fence_registers(s);
      fence_q_operand<Tile>(q);
      sm90_async::mbarrier_arrive(&ring.k_empty[slot]);
      online_softmax_tile<kBlockN, kSoftCap, kPScaleLog2>(scores, kv0, s, row_max, row_sum,
                                                          correction);
    }
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
    // the epilogue.
    if (next_item >= 0) {
      WsWork next;
      ws_decode_item<Tile>(p, items, next_item, next);
      // gtid as the compiler cannot see through: the Q rows' addresses are derived here
      // instead of hoisted out of the item loop (spilled at 240 registers, reloaded per item).
      int q_tid = gtid;
      asm volatile("" : "+r"(q_tid));
      ws_load_q_rows<Cfg>(p, next, q_tile, consumer, q_tid);
      prefill_generic::cp_async_commit();
    }
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

// `maps`: TMA maps of p.k_cache and p.v_cache (make_kv_tensor_maps over p.kv); `items`: ws_items
// for p, Cfg::kBlockM, the K/V element bytes and gridDim.x. kSoftCap must be p.logit_soft_cap > 0.
// Any 1-D grid: CTA b takes the work items ws_item_after deals it (see above).
// kTwoTermPrev (FP8 P·V): two-term P on the second-to-last KV tile too (two_term_prev_tile).
template <HopperKind kKind, int kHeadDimT, bool kSoftCap, bool kTwoTermPrev = true>
__global__ void __launch_bounds__(WsConfig<kKind, kHeadDimT>::kThreads, 1)
    prefill_attention_hopper_persistent_kernel(const AttentionParams p,
                                               const __grid_constant__ KvTensorMaps maps,
                                               const WsItems items) {
#ifdef QUENCH_SM90A_ENABLED
  using Cfg = WsConfig<kKind, kHeadDimT>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = ws_aligned_smem<Cfg>(smem_raw);
  const WsRingBarriers ring = ws_init_ring<Cfg>(smem, maps);
  __syncthreads();

  const int tid = static_cast<int>(threadIdx.x);
  if (tid < Cfg::kProducerThreads) {
    sm90::warpgroup_release_registers<Cfg::kProducerRegisters>();
    ws_persistent_producer<Cfg>(p, maps, items, smem, ring, tid);
  } else {
    sm90::warpgroup_claim_registers<Cfg::kConsumerRegisters>();
    ws_persistent_consumer<Cfg, kSoftCap, kTwoTermPrev>(p, items, smem, ring,
                                                        tid - Cfg::kProducerThreads);
  }
#endif  // QUENCH_SM90A_ENABLED
}

}  // namespace quench::prefill_hopper
