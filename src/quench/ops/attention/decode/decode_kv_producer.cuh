// The producer warp of the sm_90 decode kernel variant: streams the CTA's KV tiles into the
// ring of num_stages shared-memory stages with one 1-D bulk copy (cp.async.bulk) per K row and
// per V row, so that the four compute warps never issue a load nor sync with each other.
//
// Protocol per stage s (mbarriers, see quench/core/sm90_async_shared_address.cuh):
//   producer: wait empty[s] (previous round's parity; passes at once in the first round), lane 0
//             expects the tile's copy bytes on full[s], the lanes issue their rows' copies and
//             zero their invisible V rows, then all 32 lanes arrive on full[s] (32 arrivals).
//   consumers (decode_attention_kernel): wait full[s], compute, one arrival per warp on
//             empty[s] (kWarps arrivals).
//
// Invisible tokens (before kv_begin: window; at or past kv_end: the partial last tile) get no
// copy. Their K rows keep stale bytes (possibly NaN): every such key lies outside every row's
// [row_lo, row_hi), the tile takes the masked path, and the mask REPLACES the score by -inf, so
// its probability is exactly 0 whatever the bytes were. Their V rows would still meet that 0 in
// the P V MMA (0 x NaN = NaN), so the producer writes zeros there with plain stores; the
// arrival (release) publishes them to the consumers, and fence.proxy.async orders them before
// the bulk copies that refill the row in later rounds.
#pragma once

#include <cstdint>

#include "quench/core/sm90_async_shared_address.cuh"
#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/decode/decode_fragments.cuh"
#include "quench/ops/attention/decode/decode_kernel_args.h"

namespace quench::decode {

// Runs on one warp (lane = 0..31) for tiles [first_tile, first_tile + num_tiles) of request
// `seq`, KV head `kv_head`; token t of a tile is visible iff kv_begin <= t < kv_end.
//   pipe: num_stages stages of T::kStageBytes (K tile then V tile, rows at T::kv_smem_offset)
//   full_bars / empty_bars: shared addresses of num_stages mbarriers each, 8 bytes apart.
template <class T>
__device__ void produce_kv_tiles(const AttentionParams& p, int32_t seq, int32_t kv_head,
                                 uint8_t* pipe, uint32_t full_bars, uint32_t empty_bars,
                                 int num_stages, int32_t first_tile, int32_t num_tiles,
                                 int32_t kv_begin, int32_t kv_end, int lane) {
  const uint8_t* k_global = static_cast<const uint8_t*>(p.k_cache);
  const uint8_t* v_global = static_cast<const uint8_t*>(p.v_cache);
  const int32_t* pages_of_seq = p.block_table + static_cast<int64_t>(seq) * p.block_table_stride;
  // Same strides as the cp.async kernel (KvCacheLayout::offset in bytes); page_size 16/32/64.
  const int page_shift = __ffs(p.kv.page_size) - 1;
  const int32_t page_mask = p.kv.page_size - 1;
  const int64_t page_bytes = p.kv.page_elems() * T::kKvBytes;
  const int32_t token_bytes = static_cast<int32_t>(p.kv.token_stride() * T::kKvBytes);
  const int32_t head_bytes = static_cast<int32_t>(kv_head * p.kv.head_stride() * T::kKvBytes);
  const int32_t pages_per_tile = kTileTokens >> page_shift;
  // Block-table reads are clamped to the last visible page: they stay inside the request's row.
  const int32_t last_page_index = (kv_end - 1) >> page_shift;
  auto tile_page = [&](int tile) {  // lane j < pages_per_tile: page j of tile `tile`
    const int32_t first_page = ((first_tile + tile) * kTileTokens) >> page_shift;
    return lane < pages_per_tile ? __ldg(pages_of_seq + min(first_page + lane, last_page_index))
                                 : 0;
  };

  int32_t page = tile_page(0);
  int stage = 0;
  uint32_t phase = 0;
  for (int tile = 0; tile < num_tiles; ++tile) {
    // The next tile's block-table entries are read while this one waits and issues.
    const int32_t next_page = tile + 1 < num_tiles ? tile_page(tile + 1) : 0;
    const int32_t tok0 = (first_tile + tile) * kTileTokens;
    const uint32_t full = full_bars + 8 * stage;
    mbarrier_wait(empty_bars + 8 * stage, phase ^ 1);
    uint8_t* k_tile = pipe + stage * T::kStageBytes;
    uint8_t* v_tile = k_tile + T::kTileKvBytes;

    // This lane's rows: lane and lane + 32.
    bool visible[2];
    int visible_rows = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int32_t tok = tok0 + lane + 32 * i;
      visible[i] = tok >= kv_begin && tok < kv_end;
      visible_rows += __popc(__ballot_sync(0xffffffffu, visible[i]));
    }
    if (lane == 0) {
      mbarrier_expect_tx(full, static_cast<uint32_t>(visible_rows * 2 * T::kRowBytes));
    }
    __syncwarp();  // the bytes are expected before any copy can land
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = lane + 32 * i;
      const int32_t row_page = __shfl_sync(0xffffffffu, page, row >> page_shift);
      const int smem_offset = T::kv_smem_offset(row, 0);
      if (visible[i]) {
        // = p.kv.offset(page, token % page_size, kv_head, 0) * kKvBytes: a contiguous row.
        const int64_t offset = row_page * page_bytes + (row & page_mask) * token_bytes + head_bytes;
        bulk_copy_global_to_shared(smem_address(k_tile + smem_offset), k_global + offset,
                                   T::kRowBytes, full);
        bulk_copy_global_to_shared(smem_address(v_tile + smem_offset), v_global + offset,
                                   T::kRowBytes, full);
      } else {
#pragma unroll
        for (int b = 0; b < T::kRowBytes; b += 16)
          *reinterpret_cast<uint4*>(v_tile + smem_offset + b) = make_uint4(0, 0, 0, 0);
      }
    }
    fence_proxy_async_shared();
    mbarrier_arrive(full);
    page = next_page;
    if (++stage == num_stages) stage = 0, phase ^= 1;
  }
}

}  // namespace quench::decode
