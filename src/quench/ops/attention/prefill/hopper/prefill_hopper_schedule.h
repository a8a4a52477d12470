// The work-item order of the persistent Hopper prefill kernel (prefill_hopper_persistent_kernel
// .cuh), shared by the host (grid size) and the kernel (item decoding), and tested on the CPU.
//
// A work item is (m tile rank, sequence, KV head): rank 0 is a sequence's last m tile, the one
// with the most keys under causality. The (sequence, KV head) pairs, pair = seq * H + head
// (H = num_kv_heads), are cut into groups of consecutive pairs, and the items are numbered group
// by group, rank-major inside a group (ws_item_coordinates). A CTA takes every gridDim.x-th item,
// so the CTAs working at the same time read the K/V of one group's pairs and take the group's
// heaviest items first. By default groups are sized by ws_pairs_per_group so that a group's K/V
// fits L2 (with one group of every pair, a batch of 16 sequences of 1k tokens has all 128 pairs'
// K/V in flight at once, 64 MiB of bf16 against a 60 MiB L2: bf16 at 1k was 10% slower);
// QUENCH_PREFILL_ITEM_GROUPS=all keeps one group (the heaviest items of the whole batch first).
// persistent_by_default says which launches take the persistent kernel at all.
#pragma once

#include <cstdint>

#include "quench/core/host_device.h"

namespace quench::prefill_hopper {

// K/V bytes that the pairs of one group may keep in L2 together (of the H200's 60 MiB, leaving
// room for Q, O and the copies that the second L2 partition holds).
inline constexpr int64_t kScheduleGroupKvBytes = int64_t{16} << 20;
// Items per CTA that one group holds at least, so that heaviest-first still balances the grid.
inline constexpr int kScheduleGroupItemsPerCta = 4;

// Work items of the schedule (empty ones included); also the host's grid bound.
QUENCH_HD int ws_schedule_size(int max_q_len, int num_q_heads, int num_kv_heads, int num_seqs,
                               int block_m) {
  const int64_t rows = static_cast<int64_t>(max_q_len) * (num_q_heads / num_kv_heads);
  const int64_t max_m_tiles = (rows + block_m - 1) / block_m;
  return static_cast<int>(max_m_tiles * num_seqs * num_kv_heads);
}

// Pairs per group for `pairs` pairs of at most `m_tiles` m tiles whose K/V take `pair_kv_bytes`
// each, on `ctas` CTAs: as many as kScheduleGroupKvBytes of K/V allows, but at least enough for
// kScheduleGroupItemsPerCta items per CTA, and at most `pairs`.
QUENCH_HD int ws_pairs_per_group(int pairs, int m_tiles, int64_t pair_kv_bytes, int ctas) {
  const int64_t by_l2 = kScheduleGroupKvBytes / (pair_kv_bytes > 0 ? pair_kv_bytes : 1);
  const int64_t by_balance = (int64_t{kScheduleGroupItemsPerCta} * ctas + m_tiles - 1) / m_tiles;
  const int64_t wanted = by_l2 > by_balance ? by_l2 : by_balance;
  return static_cast<int>(wanted < pairs ? wanted : pairs);
}

// An item's place: its m tile rank and its (sequence, KV head) pair.
struct WsItemCoordinates {
  int rank;
  int pair;
};

// Item `item` (0 <= item < pairs * m_tiles) of the grouped numbering: group g holds items
// g * per_group * m_tiles onwards, rank-major over its pairs (per_group of them, fewer in the
// last group).
QUENCH_HD WsItemCoordinates ws_item_coordinates(int item, int pairs, int m_tiles, int per_group) {
  const int first_pair = item / (per_group * m_tiles) * per_group;
  const int size = per_group < pairs - first_pair ? per_group : pairs - first_pair;
  const int j = item - first_pair * m_tiles;
  return {j / size, first_pair + j % size};
}

// Chunks of at most this many query tokens run persistent by default. Measured on the H200
// (16k tokens per batch, hd128 causal, bench/LOG.md 2026-12-03 fourth session): persistent wins
// where CTAs are short (1k: +7% bf16, +17% FP8, +16% FP8 P·V; 2k: +2-8%), is even at 4k, and
// at 8k-16k loses 3-14% at page 16 (FP8 P·V most: its producer spills in the persistent kernel).
inline constexpr int kPersistentMaxQueryLen = 2048;
// bf16 q over a bf16 cache runs persistent at every chunk length: at head_dim 128 in every page
// size, at head_dim 64 in pages of at least kPersistentAnyLenMinPage tokens. Measured on the
// H200, hd128 causal, persistent / per tile TFLOP/s: page 64 (sixth session) 1k 346 / 309, 2k
// 443 / 403, 4k 518 / 497, 8k 561 / 551, 16k 597 / 583; page 16 since its producer's four warps
// issue the TMA loads (tenth session) 4k 496 / 477, 8k 566 / 541, 16k 597 / 579 (per tile had
// won there from 8k before: 517 / 502). head_dim 64 at page 16 still favours per tile (398 / 377
// at 8k), the FP8-KV kinds are even or favour per tile, and head_dim 256 (two ring slots) loses
// persistent (449 / 467 at 8k page 16). Page 32 (four pages per tile, like page 16's eight
// spread over the producer's warps) is not measured and follows head_dim 128's rule.
inline constexpr int kPersistentAnyLenMinPage = 64;

// Whether a launch runs the persistent kernel (else the per-tile one) when nothing forces a
// schedule: bf16 q over a bf16 cache at every chunk length at head_dim 128, and at head_dim 64 in
// pages of kPersistentAnyLenMinPage+ tokens; every other launch for chunks of at most
// kPersistentMaxQueryLen.
inline bool persistent_by_default(bool bf16_over_bf16, int head_dim, int page_size, int max_q_len) {
  if (bf16_over_bf16 && head_dim == 128) return true;
  if (bf16_over_bf16 && head_dim < 128 && page_size >= kPersistentAnyLenMinPage) return true;
  return max_q_len <= kPersistentMaxQueryLen;
}

// The schedule of one launch, the persistent kernel's argument (filled by the host): the kernel
// reads it in place (constant-bank operands). Sizes computed in the kernel were hoisted out of its
// loops and held in registers, which the FP8 P·V producer (24 registers) spilled: 308 bytes
// when the kernel derived the group size itself (cc4da12).
struct WsItems {
  int count;            // ws_schedule_size: the grid's work items, empty ones included
  int group;            // q heads per KV head
  int pairs;            // (sequence, KV head) pairs
  int m_tiles;          // m tiles of the longest chunk
  int pairs_per_group;  // pairs, or ws_pairs_per_group where grouped for L2
};

// The schedule of a launch on `ctas` CTAs; l2_groups: groups of ws_pairs_per_group pairs whose
// K/V (2 * max_seq_len * head_dim * kv_bytes bytes per pair) fits L2, else one group of every
// pair. REQUIRES: max_q_len, num_seqs > 0.
QUENCH_HD WsItems ws_items(int max_q_len, int max_seq_len, int num_q_heads, int num_kv_heads,
                           int num_seqs, int head_dim, int kv_bytes, int block_m, int ctas,
                           bool l2_groups) {
  const int count = ws_schedule_size(max_q_len, num_q_heads, num_kv_heads, num_seqs, block_m);
  const int pairs = num_seqs * num_kv_heads;
  const int m_tiles = count / pairs;  // ws_schedule_size is m tiles times pairs
  const int64_t pair_kv_bytes = 2 * static_cast<int64_t>(max_seq_len) * head_dim * kv_bytes;
  return {count, num_q_heads / num_kv_heads, pairs, m_tiles,
          l2_groups ? ws_pairs_per_group(pairs, m_tiles, pair_kv_bytes, ctas) : pairs};
}

}  // namespace quench::prefill_hopper
