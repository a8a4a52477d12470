// The persistent Hopper prefill kernel's walk over its work items
// (prefill_hopper_persistent_kernel.cuh): the CTA's next item of the schedule
// (prefill_hopper_schedule.h), decoded from q_offsets on the fly, and a cursor over the CTA's
// KV tiles across all its items.
#pragma once

#include "quench/ops/attention/attention_params.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_schedule.h"
#include "quench/ops/attention/prefill/hopper/prefill_hopper_ws_work.cuh"

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

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
