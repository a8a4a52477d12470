// The warp-specialized Hopper (sm_90a) prefill attention kernel (head_dim 64, 128 and, bf16 q
// only, 256, the launcher's default there too; QUENCH_PREFILL_HD256=sync keeps the synchronous
// kernel as the A/B baseline).
// Same operand kinds, numerics and per-tile steps (prefill_hopper_tile.cuh) as the
// synchronous kernel; what changes is who does what, and when:
//
// One CTA of three warpgroups per (tile of 128 packed query rows, KV head, sequence).
//   producer  warpgroup 0 (setmaxnreg down): loads each K/V tile (kBlockN keys: 128; 64 at
//             head_dim 256 and for bf16 q over FP8 KV at 128) with TMA, one box per page, each
//             page's boxes issued by one lane (ws_load_page: warp 0's, or all four warps' where
//             a tile spans four pages or more), page ids read from the block table; tensor maps
//             of kv_tensor_map.h, kernel parameters). bf16 K and V land straight in the ring
//             slot (V as cached is P V's MN-major B operand); FP8 K too unless it is widened,
//             while FP8 V lands in a private raw stage (two, where they fit, let
//             kPrefetchTiles tiles fly) from which the producer builds the slot's V operand:
//             V^T for FP8 P V (transpose_v_fp8), V widened to f16 for 16-bit
//             P V (MN-major, no transpose). The slot's `full` mbarrier completes when the loads'
//             bytes have landed and the built operands are fenced for the async proxy. It waits on
//             the slot's `empty` mbarriers before reusing it. See ws_producer.
//   consumers warpgroups 1 and 2 (setmaxnreg up), packed rows 64c..64c+63 for consumer c:
//             wait `full`, S = Q K^T (wgmma SS), online softmax in registers, P V (wgmma RS),
//             arrive on `empty` once the wgmmas reading the slot have completed. Ping-pong
//             (head_dim 128, WsConfig::kPingPong): consumer c issues its GEMMs only after the
//             other consumer issued its own (two named barriers), so one consumer's softmax runs
//             under the other's GEMMs. P V of tile t is issued right after tile t + 1's Q K^T
//             and runs under tile t + 1's softmax (FA3's intra-warpgroup overlap); FP8 P V
//             (two-level) lands in T, 64 more registers, and joins O in fp32 after that softmax.
// Ring protocol (kStages slots, tile t in slot t % kStages, use k = t / kStages):
//   full[s]    kFullArrivals producer arrivals plus the direct loads' bytes; the consumer of
//              tile t waits parity k & 1. Where WsConfig::kSplitFull, full[s] counts K alone
//              and v_full[s] V: the producer loads each after its own `empty` wait, and the
//              consumer waits for tile t's V only where it issues its P V, in iteration t + 1.
//   k_empty[s] 256 consumer arrivals once Q K^T has read the slot's K; v_empty[s] once P V has
//              read its V operand. The producer of tile t >= kStages waits parity (k-1) & 1 of
//              k_empty before loading K into the slot, and of v_empty before writing V: K
//              loads start while the previous P V still reads the slot's V. Direct V loads
//              wait for both.
#pragma once

#include <cstdint>

#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/generic/mma_sm80.cuh"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_fragment_store.cuh"
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

// The ring's mbarriers, kStages each (see the protocol above), and the producer's own.
struct WsRingBarriers {
  uint64_t* full;
  uint64_t* k_empty;
  uint64_t* v_empty;
  uint64_t* raw_full;  // [2]: raw stage s's loads have landed (1 arrival + bytes)
  uint64_t* tail;      // the last tile's loads have landed (direct-V kinds; 1 arrival + bytes)
  uint64_t* v_full;    // the slot's V (WsConfig::kSplitFull; else the same as full)
};

#ifdef QUENCH_SM90A_ENABLED

// The work item (m tile `m_rank` counted from the sequence's last, KV head, sequence): m_rank 0
// is the tile with the most keys under causality. False when the sequence has no such tile.
// group: p.num_q_heads / p.kv.num_kv_heads.
template <class Tile>
__device__ __forceinline__ bool ws_work_item(const AttentionParams& p, int group, int m_rank,
                                             int kv_head, int seq, WsWork& w) {
  w.seq = seq;
  w.kv_head = kv_head;
  w.group = group;
  w.q_begin = p.q_offsets[w.seq];
  w.q_len = p.q_offsets[w.seq + 1] - w.q_begin;
  w.rows = w.q_len * w.group;
  const int m_tiles = (w.rows + Tile::kBlockM - 1) / Tile::kBlockM;
  const int m_tile = m_tiles - 1 - m_rank;
  if (m_tile < 0) return false;
  const int seq_len = p.seq_lens[w.seq];
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

// The one work item of a CTA of the per-tile grid, sequence blockIdx.z: with heads_first (the
// grid is KV heads x query tiles x sequences) KV head blockIdx.x and m tile rank blockIdx.y (0:
// the last tile, the most keys under causality), else the other way round. The hardware starts
// CTAs x-fastest. Heads first starts each sequence's tiles rank by rank over its KV heads, the
// heaviest first: with ranks first the last pairs' heavy tiles start late (the busiest SM had
// 2.3-2.6% more work than the mean at 1k-2k tokens instead of 0.4-0.7%), but the CTAs running at
// once read one pair's K/V instead of a whole sequence's (prefill_attention_hopper.cu picks).
// False when this CTA has no rows (the sequence is shorter than the grid's longest one).
template <class Tile>
__device__ __forceinline__ bool ws_work(const AttentionParams& p, int heads_first, WsWork& w) {
  const int x = static_cast<int>(blockIdx.x);
  const int y = static_cast<int>(blockIdx.y);
  return ws_work_item<Tile>(p, p.num_q_heads / p.kv.num_kv_heads, heads_first ? y : x,
                            heads_first ? x : y, static_cast<int>(blockIdx.z), w);
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
        // K once its slot's K is free, V once its V is (see the protocol above).
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

// The CTA's shared window aligned to the 1024-byte swizzle atom (the swizzle works on shared
// addresses), and its ring barriers, initialised by thread 0 (tensor maps prefetched too); the
// caller syncs the CTA before any thread uses them.
template <class Cfg>
__device__ __forceinline__ unsigned char* ws_aligned_smem(unsigned char* smem_raw) {
  const uint32_t raw_address = sm90::smem_address(smem_raw);
  return smem_raw + ((1024u - raw_address % 1024u) % 1024u);
}
template <class Cfg>
__device__ __forceinline__ WsRingBarriers ws_init_ring(unsigned char* smem,
                                                       const KvTensorMaps& maps) {
  uint64_t* barriers = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  // kSplitFull: full, v_full, k_empty, v_empty per slot; else v_full is full.
  constexpr int kV = Cfg::kSplitFull ? Cfg::kStages : 0;
  const WsRingBarriers ring{barriers,
                            barriers + kV + Cfg::kStages,
                            barriers + kV + 2 * Cfg::kStages,
                            barriers + kV + 3 * Cfg::kStages,
                            barriers + kV + 3 * Cfg::kStages + 2,
                            barriers + kV};
  if (threadIdx.x == 0) {
    sm90_async::prefetch_tensor_map(&maps.k);
    sm90_async::prefetch_tensor_map(&maps.v);
    for (int s = 0; s < Cfg::kStages; ++s) {
      sm90_async::mbarrier_init(&ring.full[s], Cfg::kFullArrivals);
      if constexpr (Cfg::kSplitFull) sm90_async::mbarrier_init(&ring.v_full[s], 1);
      sm90_async::mbarrier_init(&ring.k_empty[s], Cfg::kConsumerThreads);
      sm90_async::mbarrier_init(&ring.v_empty[s], Cfg::kConsumerThreads);
    }
    sm90_async::mbarrier_init(&ring.raw_full[0], 1);
    sm90_async::mbarrier_init(&ring.raw_full[1], 1);
    sm90_async::mbarrier_init(ring.tail, 1);
    sm90_async::mbarrier_init_fence();  // visible to the TMA unit's complete_tx
  }
  return ring;
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
  float q_factor = 1.0f;  // f16 Q K^T: the warp's Q scale back (q_rows_to_f16)
  if constexpr (Tile::kWidenK) q_factor = q_rows_to_f16<Tile>(q_tile, consumer, gtid);
  sm90::fence_proxy_async_shared();
  sm90_async::named_barrier_sync(Cfg::kQReadyBarrier + consumer, 128);
  QOperand<Tile> q = q_operand_at<Tile>(q_tile, consumer);
  load_q_fragments<Tile>(q, q_tile, consumer, gtid);

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
  // t's `full` (with two ring slots that wait needs it).
  for (int tile = 0; tile < n_tiles; ++tile) {
    sm90::wgmma_wait_group<0>();
    finish_deferred_pv();
    if (tile > 1) sm90_async::mbarrier_arrive(&ring.v_empty[(tile - 2) % kStages]);
    pack_p<Tile, true>(s, p_frag);
    // FP8 P V: tile n - 2's second P term, for the tail (ws_two_term_tail).
    if constexpr (Tile::kFp8Pv && kTwoTermPrev) {
      if (tile == n_tiles - 1) hold_p_lo<Tile, Cfg::kConsumerThreads>(s, p_frag, held_p_lo, ctid);
    }

    const int kv0 = w.kv_begin + tile * kBlockN;
    const int slot = tile % kStages;
    const uint32_t k_address = sm90::smem_address(smem + Cfg::kSlotOffset + slot * Cfg::kSlotBytes);
    sm90_async::mbarrier_wait(&ring.full[slot], static_cast<uint32_t>((tile / kStages) & 1));
    if constexpr (Cfg::kSplitFull) {
      // The V of this iteration's P V: tile t - 1's (tile 0's at tile 0, see below).
      const int pv_tile = max(tile - 1, 0);
      sm90_async::mbarrier_wait(&ring.v_full[pv_tile % kStages],
                                static_cast<uint32_t>((pv_tile / kStages) & 1));
    }

    // In turn with the other consumer (ping-pong), which may go once both GEMMs are issued.
    // At tile 0 the P V is (O or T) += 0 * V of tile 0 (S zeroed; the producer leaves V
    // finite): the code has no branch around a wgmma, which would make the compiler serialize
    // every wgmma.
    if constexpr (Cfg::kPingPong) {
      sm90_async::named_barrier_sync(Cfg::kScheduleBarrier + consumer, Cfg::kConsumerThreads);
    }
    sm90::fence_registers(pv_acc);
    sm90::fence_registers(p_frag);
    sm90::wgmma_fence();
    issue_qk<Tile>(s, q, k_address);
    sm90::wgmma_commit_group();
    ws_issue_pv<Cfg>(pv_acc, p_frag, vt_address_of(max(tile - 1, 0)));
    sm90::wgmma_commit_group();
    // Consumer 1's last turn would open a barrier that consumer 0 never waits on again.
    if (Cfg::kPingPong && (consumer == 0 || tile + 1 < n_tiles)) {
      sm90_async::named_barrier_arrive(Cfg::kScheduleBarrier + (1 - consumer),
                                       Cfg::kConsumerThreads);
    }
    // Groups complete in order: with the P V group pending at most, Q K^T is done.
    sm90::wgmma_wait_group<1>();
    sm90::fence_registers(s);
    fence_q_operand<Tile>(q);
    sm90_async::mbarrier_arrive(&ring.k_empty[slot]);
    online_softmax_tile<kBlockN, kSoftCap, kPScaleLog2>(scores, kv0, s, row_max, row_sum,
                                                        correction);
  }
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

// `maps`: TMA maps of p.k_cache and p.v_cache (make_kv_tensor_maps over p.kv); heads_first: the
// grid's layout (ws_work, prefill_common::QueryTileGrid). kSoftCap must be p.logit_soft_cap > 0
// (the launcher picks the instantiation).
// kTwoTermPrev (FP8 P·V): two-term P on the second-to-last KV tile too (two_term_prev_tile).
template <HopperKind kKind, int kHeadDimT, bool kSoftCap, bool kTwoTermPrev = true>
__global__ void __launch_bounds__(WsConfig<kKind, kHeadDimT>::kThreads, 1)
    prefill_attention_hopper_ws_kernel(const AttentionParams p,
                                       const __grid_constant__ KvTensorMaps maps,
                                       const int heads_first) {
#ifdef QUENCH_SM90A_ENABLED
  using Cfg = WsConfig<kKind, kHeadDimT>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = ws_aligned_smem<Cfg>(smem_raw);
  WsWork w;
  if (!ws_work<typename Cfg::Tile>(p, heads_first, w)) return;  // the whole CTA, before any barrier
  const WsRingBarriers ring = ws_init_ring<Cfg>(smem, maps);
  __syncthreads();

  const int tid = static_cast<int>(threadIdx.x);
  if (tid < Cfg::kProducerThreads) {
    sm90::warpgroup_release_registers<Cfg::kProducerRegisters>();
    ws_producer<Cfg>(p, maps, w, smem, ring, tid);
  } else {
    sm90::warpgroup_claim_registers<Cfg::kConsumerRegisters>();
    ws_consumer<Cfg, kSoftCap, kTwoTermPrev>(p, w, smem, ring, tid - Cfg::kProducerThreads);
  }
#endif  // QUENCH_SM90A_ENABLED
}

}  // namespace quench::prefill_hopper
