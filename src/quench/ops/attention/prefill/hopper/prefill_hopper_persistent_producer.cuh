// The producer warpgroup of the persistent Hopper prefill kernel
// (prefill_hopper_persistent_kernel.cuh): the warp-specialized producer's protocol
// (prefill_hopper_ws_producer.cuh, prefill_hopper_ws_ring.cuh) over the CTA's KV tiles of all
// its work items, with the raw-stage loaders' cursors kept in shared memory.
#pragma once

#include <cstdint>

#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_persistent_items.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_schedule.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_config.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_producer.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_ring.cuh"

namespace quench::prefill_hopper {

#ifdef QUENCH_SM90A_ENABLED

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
// work items, g counting them (see prefill_hopper_persistent_kernel.cuh), issued by warp 0 or,
// where ws_spread_loads says so, by all four warps, each walking the tiles with its own cursor.
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

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
