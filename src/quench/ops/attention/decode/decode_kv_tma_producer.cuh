// The producer warp of the sm_90 decode kernel (kTma): streams the CTA's 64-token KV tiles into
// the ring of num_stages shared-memory stages by tensor TMA, one box per (page, KV head, 128-byte
// column block) of K and of V: at page_size 16 and one block (FP8 head_dim 64/128, bf16 64) a
// tile is 4 + 4 loads, at page_size 64 1 + 1; bf16 head_dim 128 doubles that. The four compute
// warps never issue a load nor sync with each other.
//
// Stage layout (DecodeTraits::kv_smem_offset): K tile then V tile, each kKvBoxes blocks of
// kTileTokens rows x 128 bytes; page j of the tile lands at row j * page_size of every block,
// with the 128-byte swizzle of the tensor map (16-byte chunk c of row r at chunk c ^ (r % 8)).
//
// Protocol per stage s (mbarriers, see quench/core/sm90_async.cuh):
//   producer: wait empty[s] (previous round's parity; passes at once in the first round); lane 0
//             announces the tile's box bytes on full[s] and arrives (full counts 1 arrival); the
//             lanes of the loaded pages issue their boxes, which complete the phase on landing.
//   consumers (decode_attention_kernel): wait full[s], compute, one arrival per warp on
//             empty[s] (kWarps arrivals).
//
// Invisible tokens (before kv_begin: window; at or past kv_end: the partial last tile). Pages
// wholly outside [kv_begin, kv_end) are not loaded (their block-table entries may lie past the
// request's row, or be padding); their rows keep whatever the stage held (an older tile, or
// uninitialised shared memory: any bit pattern, NaN included). Rows of invisible tokens inside a
// loaded page hold the cache's bytes (unused slots: any bit pattern). So no invisible row is
// trusted, and the consumers never let one through: every key of an invisible token lies outside
// every query row's [row_lo, row_hi), the tile takes the masked path, and the mask REPLACES the
// score by -inf (probability exactly 0); on that same masked path the consumers replace the V
// words of invisible tokens by zeros in registers before the P V product (0 x NaN would be NaN).
// The producer thus never writes the stages itself: no generic-proxy stores meet the TMA writes.
#pragma once

#include <cstdint>

#include "quench/core/sm90_async.cuh"
#include "quench/kv_cache/kv_tensor_map.h"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {

// Runs on one warp (lane = 0..31) for tiles [first_tile, first_tile + num_tiles) of request
// `seq`, KV head `kv_head`; token t of a tile is visible iff kv_begin <= t < kv_end.
//   maps: TMA maps of p.k_cache and p.v_cache (make_kv_tensor_maps over p.kv), kernel parameter
//   pipe: num_stages stages of T::kStageBytes, 1024-byte aligned (the swizzle atom)
//   full_bars / empty_bars: shared addresses of num_stages mbarriers each, 8 bytes apart.
template <class T>
__device__ void produce_kv_tiles(const AttentionParams& p, const KvTensorMaps& maps, int32_t seq,
                                 int32_t kv_head, uint8_t* pipe, uint32_t full_bars,
                                 uint32_t empty_bars, int num_stages, int32_t first_tile,
                                 int32_t num_tiles, int32_t kv_begin, int32_t kv_end, int lane) {
  const int32_t* pages_of_seq = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;
  const int page_shift = __ffs(p.kv.page_size) - 1;  // page_size 16/32/64
  const int32_t pages_per_tile = kTileTokens >> page_shift;
  const bool nhd = p.kv.layout == KvLayout::kNHD;
  const int c1 = nhd ? kv_head : 0;  // map coordinates {column, c1, c2, page}
  const int c2 = nhd ? 0 : kv_head;
  // Shared-memory bytes one page's boxes land in (one tensor): page_size rows x 128 bytes per
  // column block, FP8 head_dim 64's zero-filled upper 64 bytes included.
  const uint32_t page_box_bytes = static_cast<uint32_t>(T::kKvBoxes * 128) << page_shift;
  const int row_offset = (lane << page_shift) * 128;  // lane j loads page j of each tile
  // Block-table entries come in batches of 32 consecutive pages of the split, one per lane, each
  // batch read (one coalesced 128-byte load) a whole batch before its first use, so that no TMA
  // issue waits on a page-id load once the first batch is in. (Reading tile t + 1's entries
  // while tile t issued put a global-load latency before each of the first num_stages issues:
  // the ring filled one latency per stage.) Page i of the split is the request's page
  // first_page + i; its entry is -1 where the page holds no visible token (not loaded, and its
  // block-table entry, which may lie past the request's row, is not read).
  const int32_t first_page = first_tile * pages_per_tile;
  const int32_t split_pages = num_tiles * pages_per_tile;
  auto page_batch = [&](int32_t b) {
    const int32_t i = b * 32 + lane;
    const int32_t first_tok = (first_page + i) << page_shift;
    const bool load =
        i < split_pages && first_tok < kv_end && first_tok + p.kv.page_size > kv_begin;
    return load ? __ldg(pages_of_seq + first_page + i) : -1;
  };
  int32_t batch = 0;
  int32_t batch_pages = page_batch(0);  // pages [32 batch, 32 batch + 32) of the split
  int32_t next_batch_pages = page_batch(1);
  const int32_t tile_page_of_lane = lane & (pages_per_tile - 1);  // a power of two

  int stage = 0;
  uint32_t phase = 0;
  for (int tile = 0; tile < num_tiles; ++tile) {
    // Lane j < pages_per_tile takes page j of the tile from its batch (pages_per_tile = 1, 2 or
    // 4 divides 32: a tile never straddles two batches).
    const int32_t tile_first = tile * pages_per_tile;
    if (tile_first >> 5 != batch) {
      ++batch;
      batch_pages = next_batch_pages;
      next_batch_pages = page_batch(batch + 1);
    }
    const int32_t batch_page =
        __shfl_sync(0xffffffffu, batch_pages, (tile_first & 31) + tile_page_of_lane);
    const int32_t page = lane < pages_per_tile ? batch_page : -1;
    const uint32_t full = full_bars + 8 * stage;
    sm90_async::mbarrier_wait(empty_bars + 8 * stage, phase ^ 1);
    const uint32_t k_tile = smem_address(pipe + stage * T::kStageBytes) + row_offset;
    const uint32_t v_tile = k_tile + T::kTileKvBytes;
    const int loaded_pages = __popc(__ballot_sync(0xffffffffu, page >= 0));
    if (lane == 0) {
      sm90_async::mbarrier_expect_bytes(full,
                                        2 * page_box_bytes * static_cast<uint32_t>(loaded_pages));
      sm90_async::mbarrier_arrive(full);
    }
    __syncwarp();  // the bytes are announced before any box can land
    if (page >= 0) {
#pragma unroll
      for (int b = 0; b < T::kKvBoxes; ++b) {
        const uint32_t block = static_cast<uint32_t>(b * T::kTileBlockBytes);
        const int column = b * T::kBoxElems;
        sm90_async::tma_load_4d(k_tile + block, &maps.k, column, c1, c2, page, full);
        sm90_async::tma_load_4d(v_tile + block, &maps.v, column, c1, c2, page, full);
      }
    }
    if (++stage == num_stages) stage = 0, phase ^= 1;
  }
}

}  // namespace quench::decode
