// The warp-specialized Hopper prefill kernels' unit of work (prefill_hopper_ws_kernel.cuh): one
// tile of 128 packed query rows of one (sequence, KV head), the keys those rows see under
// causality and the window, and where the per-tile grid's CTA finds its item.
#pragma once

#include "quench/ops/attention/attention_params.h"

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

#endif  // QUENCH_SM90A_ENABLED

}  // namespace quench::prefill_hopper
