// The producer warpgroup of the warp-specialized Hopper prefill kernels
// (prefill_hopper_ws_kernel.cuh): TMA loads of each K/V tile into the ring, one box per page and
// 128-byte column block, and for FP8 KV the operands it builds from raw stages (V^T, or K / V
// widened to f16). The ring protocol is prefill_hopper_ws_ring.cuh's.
#pragma once

#include <cstdint>

#include "quench/core/sm90_wgmma.cuh"
#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_tile.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_config.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_ring.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_work.cuh"
#include "quench/ops/attention/prefill/hopper/sm90_sync.cuh"

namespace quench::prefill_hopper {

#ifdef QUENCH_SM90A_ENABLED

// Where a tile's loads land and which barriers count them (see ws_producer).
struct WsTileLoad {
  unsigned char* k_dst;  // the tile's K rows (column block 0, row 0)
  unsigned char* v_dst;
  uint64_t* k_barrier;
  uint64_t* v_barrier;
};

// Whether a tile's loads are issued by all four producer warps (ws_load_page): where a tile
// spans four pages or more. Each page's boxes are a lane-serialised ELECT / UTMALDG round in
// the SASS, so one warp issuing eight pages (page 16, 128-key tiles) kept the ring short of
// loads. H200, b2 x 8k causal page 16 (bench/LOG.md, tenth session): FP8 P·V 654 -> 699
// TFLOP/s, bf16 525 -> 559, head_dim 256 bf16 399 -> 474, FP8 q with bf16 P·V 491 -> 570; at
// page 64 (two pages per tile) four warps cost 1%, so one warp issues there.
template <int kBlockN>
__device__ __forceinline__ bool ws_spread_loads(const AttentionParams& p) {
  return p.kv.page_size * 4 <= kBlockN;
}

// The page of each tile that producer thread (warp, lane) loads (32 and over: none): page l by
// lane l of warp 0, or, spread, page j by lane j / 4 of warp j % 4. Page 0 (always present) is
// warp 0 lane 0's, which announces the tile's bytes.
__device__ __forceinline__ int ws_load_page(bool spread, int warp, int lane) {
  if (spread) return lane < 8 ? lane * 4 + warp : 32;
  return warp == 0 ? lane : 32;
}

// Issues the TMA loads of KV tile `tile` (keys kv0 .. kv0 + kBlockN - 1) of the CTA's KV head
// that fall to this producer thread: page `page` of the tile (ws_load_page; a tile spans
// kBlockN / page_size <= 8 pages), one box per 128-byte column block of K and of V, if that page
// holds a key before kv_end. Pages past kv_end are not read (their block-table entries may be
// padding); rows past kv_end in the last page are loaded from the cache as they are (the caller
// keeps them out of P V). The thread of page 0 first announces the whole tile's bytes:
// arrive.expect_tx on the barrier of the direct loads, and on the raw stage's barrier for the raw
// ones (one barrier per destination kind). Loads of other warps may land before that
// announcement: the barrier's transaction count then dips below zero (the PTX ISA gives it the
// signed range -(2^20 - 1) .. 2^20 - 1), and its phase still waits for the announcing arrival.
// kLoadK / kLoadV: which of the two tensors to load (the kSplitFull producer loads K and V
// after their own `empty` waits).
template <class Cfg, bool kLoadK = true, bool kLoadV = true>
__device__ __forceinline__ void ws_issue_tile_loads(const AttentionParams& p,
                                                    const KvTensorMaps& maps, const WsWork& w,
                                                    const int32_t* pages, int tile,
                                                    const WsTileLoad& load, int page) {
  using Tile = typename Cfg::Tile;
  constexpr int kBlockN = Tile::kBlockN;
  const int page_shift = __ffs(p.kv.page_size) - 1;
  const int kv0 = w.kv_begin + tile * kBlockN;
  const int valid_keys = min(kBlockN, w.kv_end - kv0);
  const int tile_pages = (valid_keys + p.kv.page_size - 1) >> page_shift;
  // Every box lands 128 bytes per row and page_size rows (FP8 at head_dim 64 included: its
  // second 64 bytes are out of the tensor's bounds, zero-filled, and counted).
  const uint32_t tensor_bytes =
      static_cast<uint32_t>(tile_pages * p.kv.page_size * 128 * Cfg::kKvBoxes);
  if (page == 0) {
    if (kLoadK && kLoadV && load.k_barrier == load.v_barrier) {
      sm90_async::mbarrier_arrive_expect_bytes(load.k_barrier, 2 * tensor_bytes);
    } else {
      if constexpr (kLoadK) sm90_async::mbarrier_arrive_expect_bytes(load.k_barrier, tensor_bytes);
      if constexpr (kLoadV) sm90_async::mbarrier_arrive_expect_bytes(load.v_barrier, tensor_bytes);
    }
  }
  __syncwarp();
  if (page < tile_pages) {
    const int32_t page_id = pages[(kv0 >> page_shift) + page];
    const bool nhd = p.kv.layout == KvLayout::kNHD;
    const int c1 = nhd ? w.kv_head : 0;
    const int c2 = nhd ? 0 : w.kv_head;
    const int row_offset = (page << page_shift) * 128;  // the page's first row in the tile
#pragma unroll
    for (int b = 0; b < Cfg::kKvBoxes; ++b) {
      const int offset = b * kBlockN * 128 + row_offset;
      if constexpr (kLoadK) {
        sm90_async::tma_load_4d(load.k_dst + offset, &maps.k, b * Cfg::kKvBoxElems, c1, c2, page_id,
                                load.k_barrier);
      }
      if constexpr (kLoadV) {
        sm90_async::tma_load_4d(load.v_dst + offset, &maps.v, b * Cfg::kKvBoxElems, c1, c2, page_id,
                                load.v_barrier);
      }
    }
  }
}

// Zeroes rows first_row .. kBlockN - 1 of a block-split swizzled tile of kBlockN rows with
// kChunks 16-byte chunks per row; `index` is the calling thread's index among kWorkers.
template <int kBlockN, int kChunks, int kWorkers>
__device__ __forceinline__ void ws_zero_rows(unsigned char* tile, int first_row, int index) {
  for (int idx = first_row * kChunks + index; idx < kBlockN * kChunks; idx += kWorkers) {
    *reinterpret_cast<uint4*>(tile + block_tile_offset(kBlockN, idx / kChunks, idx % kChunks)) =
        make_uint4(0u, 0u, 0u, 0u);
  }
}

// The 128 producer threads build a tile's operands in its ring slot from its raw stage: V^T
// (FP8 P V) or V widened to f16 in its cached layout (the MN-major operand of 16-bit P V), and
// the K widened to f16 (bf16 q over FP8 KV). The caller fences and arrives.
template <class Cfg>
__device__ __forceinline__ void ws_build_operands(const unsigned char* raw, unsigned char* slot,
                                                  int ptid) {
  using Tile = typename Cfg::Tile;
  constexpr int kWorkers = Cfg::kProducerThreads;
  unsigned char* v_operand = slot + Cfg::kSlotKBytes;
  if constexpr (Tile::kFp8Pv) {
    transpose_v_fp8<kWorkers>(raw, v_operand, ptid);
  } else {
    widen_fp8_tile<kWorkers, Tile::kHeadDim, Tile::kBlockN>(raw, v_operand, ptid);
  }
  if constexpr (Tile::kWidenK) {
    widen_fp8_tile<kWorkers, Tile::kHeadDim, Tile::kBlockN>(raw + Cfg::kRawKOffsetInStage, slot,
                                                            ptid);
  }
}

// Warpgroup 0: fills the ring. ptid = threadIdx.x (0..127). Warp 0 issues the loads (one TMA
// box per page, column block and tensor), or all four warps where ws_spread_loads says so; the
// producer's other warps also build operands from the raw stages.
//
// Direct-V kinds (bf16): K and V land in the slot; the slot's `full` counts their bytes and the
// announcing arrive.expect_tx. Each issuing warp waits for a slot's k_empty and v_empty, then
// loads its pages into it, so every free slot's loads fly (kSplitFull: K once k_empty passes,
// counted by `full`, then V once v_empty passes, counted by v_full). The last tile, when it ends
// before kBlockN keys, is the one exception: its rows past kv_end (cache memory past the
// sequence's end, or stale rows of pages not loaded) must not reach P V, where P = 0 times NaN
// would be NaN. Warp 0 alone loads it, counted on the producer's `tail` barrier instead (with
// kSplitFull its V only), waits for them, zeroes those V rows, fences, and arrives on v_full
// (`full` itself without kSplitFull; K rows past kv_end need nothing: the softmax masks their
// scores to -inf whatever they hold).
//
// Raw-stage kinds (FP8 KV): V (and widened K) land in raw stage tile % kRawStages, counted by
// raw_full[tile & 1]; direct K lands in the slot, counted by `full`. kPrefetchTiles tiles fly
// while every producer thread waits for tile t's raw stage, zeroes its V rows past kv_end (last
// tile only), builds the slot's operands (ws_build_operands, after the slot's v_empty), fences,
// and arrives on `full`.
template <class Cfg>
__device__ __forceinline__ void ws_producer(const AttentionParams& p, const KvTensorMaps& maps,
                                            const WsWork& w, unsigned char* smem,
                                            const WsRingBarriers& ring, int ptid) {
  using Tile = typename Cfg::Tile;
  constexpr int kBlockN = Tile::kBlockN;
  constexpr int kStages = Cfg::kStages;
  const int32_t* pages = p.block_table + static_cast<int64_t>(w.seq) * p.block_table_stride;
  const int warp = ptid / 32;
  const int lane = ptid % 32;
  const auto slot_k = [&](int tile) {
    return smem + Cfg::kSlotOffset + tile % kStages * Cfg::kSlotBytes;
  };
  const auto raw_stage = [&](int tile) { return smem + Cfg::raw_stage_offset(tile); };
  const auto empty_parity = [](int tile) {
    return static_cast<uint32_t>((tile / kStages - 1) & 1);
  };
  const auto valid_keys_of = [&](int tile) {
    return min(kBlockN, w.kv_end - (w.kv_begin + tile * kBlockN));
  };

  const bool spread = ws_spread_loads<kBlockN>(p);
  if constexpr (Cfg::kVDirect) {
    if (!spread && warp != 0) return;
    for (int tile = 0; tile < w.num_kv_tiles; ++tile) {
      const int slot = tile % kStages;
      if constexpr (!Cfg::kSplitFull) {
        if (tile >= kStages) {
          sm90_async::mbarrier_wait(&ring.k_empty[slot], empty_parity(tile));
          sm90_async::mbarrier_wait(&ring.v_empty[slot], empty_parity(tile));
        }
      }
      const int valid_keys = valid_keys_of(tile);
      const bool tail = valid_keys < kBlockN;
      unsigned char* k_dst = slot_k(tile);
      unsigned char* v_dst = k_dst + Cfg::kSlotKBytes;
      const int page = ws_load_page(spread && !tail, warp, lane);
      if constexpr (Cfg::kSplitFull) {
        // K once its slot's K is free, V once its V is (prefill_hopper_ws_ring.cuh's protocol).
        const WsTileLoad load{k_dst, v_dst, &ring.full[slot],
                              tail ? ring.tail : &ring.v_full[slot]};
        if (tile >= kStages) sm90_async::mbarrier_wait(&ring.k_empty[slot], empty_parity(tile));
        ws_issue_tile_loads<Cfg, true, false>(p, maps, w, pages, tile, load, page);
        if (tile >= kStages) sm90_async::mbarrier_wait(&ring.v_empty[slot], empty_parity(tile));
        ws_issue_tile_loads<Cfg, false, true>(p, maps, w, pages, tile, load, page);
      } else {
        uint64_t* barrier = tail ? ring.tail : &ring.full[slot];
        ws_issue_tile_loads<Cfg>(p, maps, w, pages, tile, {k_dst, v_dst, barrier, barrier}, page);
      }
      if (tail && warp == 0) {
        // The one tail tile of the CTA: the barrier's first phase.
        sm90_async::mbarrier_wait(ring.tail, 0);
        ws_zero_rows<kBlockN, Cfg::kKvBoxes * 8, 32>(v_dst, valid_keys, lane);
        sm90::fence_proxy_async_shared();
        __syncwarp();
        if (lane == 0) sm90_async::mbarrier_arrive(&ring.v_full[slot]);
      }
    }
  } else {
    constexpr int kPrefetch = Cfg::kPrefetchTiles;
    const int page = ws_load_page(spread, warp, lane);
    const auto issue = [&](int tile) {
      unsigned char* raw = raw_stage(tile);
      uint64_t* raw_full = &ring.raw_full[tile & 1];
      if constexpr (Cfg::kKDirect) {
        const int slot = tile % kStages;
        if (tile >= kStages) sm90_async::mbarrier_wait(&ring.k_empty[slot], empty_parity(tile));
        ws_issue_tile_loads<Cfg>(p, maps, w, pages, tile,
                                 {slot_k(tile), raw, &ring.full[slot], raw_full}, page);
      } else {
        ws_issue_tile_loads<Cfg>(p, maps, w, pages, tile,
                                 {raw + Cfg::kRawKOffsetInStage, raw, raw_full, raw_full}, page);
      }
    };
    const bool issuer = spread || warp == 0;
    if (issuer) {
      for (int tile = 0; tile < kPrefetch && tile < w.num_kv_tiles; ++tile)
        issue(tile);
    }
    for (int tile = 0; tile < w.num_kv_tiles; ++tile) {
      const int slot = tile % kStages;
      unsigned char* raw = raw_stage(tile);
      sm90_async::mbarrier_wait(&ring.raw_full[tile & 1], static_cast<uint32_t>((tile >> 1) & 1));
      const int valid_keys = valid_keys_of(tile);
      if (valid_keys < kBlockN) {
        // The CTA's last tile: raw V rows past kv_end become zeros before anything reads them.
        ws_zero_rows<kBlockN, Cfg::kKvBoxes * 8, Cfg::kProducerThreads>(raw, valid_keys, ptid);
        sm90_async::named_barrier_sync(Cfg::kProducerBarrier, Cfg::kProducerThreads);
      }
      if (tile >= kStages) sm90_async::mbarrier_wait(&ring.v_empty[slot], empty_parity(tile));
      ws_build_operands<Cfg>(raw, slot_k(tile), ptid);
      // The built operands are generic-proxy writes that wgmma reads.
      sm90::fence_proxy_async_shared();
      sm90_async::mbarrier_arrive(&ring.full[slot]);
      // Every producer thread is done reading tile's raw stage before the issuers load into it
      // again: just below (two stages, two in flight: tile + 2; one stage: tile + 1), or one
      // iteration later (two stages, one in flight).
      sm90_async::named_barrier_sync(Cfg::kProducerBarrier, Cfg::kProducerThreads);
      const int next = tile + kPrefetch;
      if (issuer && next < w.num_kv_tiles) issue(next);
    }
  }
}

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
