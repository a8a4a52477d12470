// The work-item order of the persistent Hopper prefill kernel (prefill_hopper_persistent_kernel
// .cuh), shared by the host (grid size) and the kernel (item decoding), and tested on the CPU.
//
// A work item is (m tile rank, sequence, KV head): rank 0 is a sequence's last m tile, the one
// with the most keys under causality. The (sequence, KV head) pairs, pair = seq * H + head
// (H = num_kv_heads), are cut into groups of consecutive pairs, and the items are numbered group
// by group, rank-major inside a group (ws_item_coordinates), so the CTAs working at the same
// time read the K/V of one group's pairs and take the group's heaviest items first. By default
// groups are sized by ws_pairs_per_group so that a group's K/V fits L2 (with one group of every
// pair, a batch of 16 sequences of 1k tokens has all 128 pairs' K/V in flight at once, 64 MiB
// of bf16 against a 60 MiB L2: bf16 at 1k was 10% slower); QUENCH_PREFILL_ITEM_GROUPS=all keeps
// one group (the heaviest items of the whole batch first).
//
// Which CTA takes which item (ws_item_after): a group's items are dealt to the CTAs in rounds of
// one item per CTA, in alternating directions (a snake), so the CTA that took a round's heaviest
// item takes the next round's lightest; each group starts at the CTA where the numbering left
// off. Dealt the same way every round (CTA b: items b, b + ctas, ...: WsItemOrder::kRoundRobin),
// the CTAs that start each round take its heaviest items every time: on the bench's shapes (16
// sequences of 1k tokens to 1 of 16k, 132 CTAs) the busiest CTA then had 3.1% more work than
// the mean, and 0.1-0.9% with the snake (tests/ops/attention/prefill_hopper_schedule_test.cc).
// The kernel deals the snake over bf16 K/V only (prefill_hopper_persistent_kernel.cuh says why).
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

// bf16 q over a bf16 cache runs persistent by default for chunks of at most this many query
// tokens (head_dim 64 in 16- and 32-token pages, head_dim 256), at head_dim 128 for chunks of at
// most kPersistentMaxQueryLenHd128 or more than kPerTileMaxQueryLenHd128 tokens, and at head_dim
// 64 in pages of at least kPersistentAnyLenMinPage tokens. head_dim 128 ran persistent at every
// length until Q moved into registers (fourteenth session), which gave the per-tile kernel 2-5% and
// the persistent one -1.7% at 1k and +0.5-1.5% from 8k; H200, hd128 causal, per tile / persistent
// TFLOP/s with Q in registers (bench/LOG.md, fourteenth session, call 7; each pair from one round,
// the per-tile case run after the persistent one), page 16 | page 64: 1k 339 / 331 | 339 / 340, 2k
// 434 / 424 | 438 / 433, 4k 511 / 503 | 515 / 513, 8k 564 / 564 | 565 / 572, 16k 594 / 599 | 596 /
// 607. Before, persistent / per tile (sixth and tenth sessions): page 64 1k 346 / 309, 8k 561 /
// 551; page 16 8k 566 / 541. head_dim 64 at page 16 favours per tile (398 / 377 at 8k), and
// head_dim 256 (two ring slots) loses persistent at 8k (601 / 609 with the snake order, eleventh
// session). Page 32 (four pages per tile, like page 16's eight spread over the producer's warps) is
// not measured and follows the rules of page 16. A soft-capped launch at head_dim 128 runs per tile
// at every length: with Q in registers its persistent kernel lost 2% at b2 x 8k page 16 (483 -> 474
// TFLOP/s by default, fourteenth session, call 7) while per tile it gained 2% (463 -> 473).
//
// Since the persistent consumers load the next item's Q rows under the whole current item
// (kEarlyNextQ, forty-seventh session), head_dim 128 at 1k runs persistent again: H100, page 16,
// per tile / persistent TFLOP/s, three alternating rounds: 1k 349.7 / 364.3, 349.5 / 364.8,
// 349.2 / 365.4 (+4.4%); 2k 459.5 / 460.1, 460.5 / 466.1, 467.5 / 454.2 (even), so 2k-4k stay
// per tile.
inline constexpr int kPersistentMaxQueryLen = 2048;
inline constexpr int kPersistentMaxQueryLenHd128 = 1024;
inline constexpr int kPerTileMaxQueryLenHd128 = 4096;
inline constexpr int kPersistentAnyLenMinPage = 64;

// The FP8-KV kinds (FP8 P·V, FP8 q with bf16 P·V, bf16 q over FP8 KV) run per tile at every
// chunk length: since the per-tile kernel's consumers store their rows from registers (eleventh
// session) it is even with the persistent kernel at 1k tokens and ahead at 2k, where the
// persistent kernel's 24-register FP8 producers spill (H200, per tile / persistent TFLOP/s: FP8
// P·V 1k page 64 394 / 397, 2k page 16 530 / 501; FP8 q with bf16 P·V 2k page 16 429 / 421; bf16
// q over FP8 KV 1k page 16 246 / 246, 2k page 64 290 / 281); from 4k it was ahead before.

// Whether a launch runs the persistent kernel (else the per-tile one) when nothing forces a
// schedule: bf16 q over a bf16 cache only, by the rules above.
inline bool persistent_by_default(bool bf16_over_bf16, int head_dim, int page_size, int max_q_len,
                                  bool soft_cap = false) {
  if (!bf16_over_bf16) return false;
  if (head_dim == 128) {
    return !soft_cap &&
           (max_q_len <= kPersistentMaxQueryLenHd128 || max_q_len > kPerTileMaxQueryLenHd128);
  }
  if (head_dim < 128 && page_size >= kPersistentAnyLenMinPage) return true;
  return max_q_len <= kPersistentMaxQueryLen;
}

// The per-tile kernel's grid takes KV heads first (ws_work, prefill_hopper_ws_work.cuh) where
// a sequence's K/V over all its KV heads (max_seq_len tokens) takes at most this many bytes: the
// CTAs running at once then read a whole sequence's K/V. H200 (bench/LOG.md, eleventh session),
// heads first / ranks first TFLOP/s: FP8 P·V 1k page 16 392.6 / 390.3, 2k page 64 538 / 534
// (4 MiB per sequence); bf16 q over FP8 KV 1k page 64 254 / 250, 2k page 16 290 / 286; FP8 P·V
// 8k (16 MiB) 725 / 728; bf16 hd256 8k (64 MiB) 611 / 624.
inline constexpr int64_t kHeadsFirstMaxSequenceKvBytes = int64_t{8} << 20;

inline bool per_tile_heads_first(int max_seq_len, int head_dim, int kv_bytes, int num_kv_heads) {
  const int64_t bytes = int64_t{2} * max_seq_len * head_dim * kv_bytes * num_kv_heads;
  return bytes <= kHeadsFirstMaxSequenceKvBytes;
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
  int snake;            // 1: WsItemOrder::kSnake, 0: kRoundRobin (see ws_item_after)
};

// How a group's items are dealt to the CTAs (see the file comment).
enum class WsItemOrder { kSnake, kRoundRobin };

// Chunks of at most this many query tokens keep round robin by default: at 1k tokens the snake
// lost 0.7% in an A/B call and 3.6% in a sustained sweep (bf16 hd128, H200, eleventh session),
// where its gains are 1-2.6% from 4k to 16k and 0.5-1.5% at 2k.
inline constexpr int kRoundRobinMaxQueryLen = 1024;

// The order a launch deals its items in when nothing forces one.
inline WsItemOrder default_item_order(int max_q_len) {
  return max_q_len <= kRoundRobinMaxQueryLen ? WsItemOrder::kRoundRobin : WsItemOrder::kSnake;
}

// The work item that CTA `cta` of `ctas` takes after `item` (item < 0: its first), -1 when it
// has none left; every item of the launch goes to exactly one CTA. Items of group g (starting at
// g * group_items) are dealt in rounds of `ctas`: round r gives item start + r * ctas + i to the
// CTA (start + i) % ctas for even r and to (start + ctas - 1 - i) % ctas for odd r; a group's
// last round may be partial. With ctas >= count (one item per CTA) CTA b takes item b.
QUENCH_HD int ws_item_after(int item, int cta, int ctas, const WsItems& s) {
  if (s.snake == 0) {
    const int next = item < 0 ? cta : item + ctas;
    return next < s.count ? next : -1;
  }
  const int group_items = s.pairs_per_group * s.m_tiles;
  int start = 0;
  int round = 0;
  if (item >= 0) {
    start = item / group_items * group_items;
    round = (item - start) / ctas + 1;
  }
  for (; start < s.count; start += group_items, round = 0) {
    const int size = group_items < s.count - start ? group_items : s.count - start;
    const int position = (cta - start % ctas + ctas) % ctas;
    const int j = round * ctas + (round % 2 == 0 ? position : ctas - 1 - position);
    if (j < size) return start + j;
  }
  return -1;
}

// The schedule of a launch on `ctas` CTAs; l2_groups: groups of ws_pairs_per_group pairs whose
// K/V (2 * max_seq_len * head_dim * kv_bytes bytes per pair) fits L2, else one group of every
// pair. REQUIRES: max_q_len, num_seqs > 0.
QUENCH_HD WsItems ws_items(int max_q_len, int max_seq_len, int num_q_heads, int num_kv_heads,
                           int num_seqs, int head_dim, int kv_bytes, int block_m, int ctas,
                           bool l2_groups, WsItemOrder order = WsItemOrder::kSnake) {
  const int count = ws_schedule_size(max_q_len, num_q_heads, num_kv_heads, num_seqs, block_m);
  const int pairs = num_seqs * num_kv_heads;
  const int m_tiles = count / pairs;  // ws_schedule_size is m tiles times pairs
  const int64_t pair_kv_bytes = 2 * static_cast<int64_t>(max_seq_len) * head_dim * kv_bytes;
  return {count,
          num_q_heads / num_kv_heads,
          pairs,
          m_tiles,
          l2_groups ? ws_pairs_per_group(pairs, m_tiles, pair_kv_bytes, ctas) : pairs,
          order == WsItemOrder::kSnake ? 1 : 0};
}

}  // namespace quench::prefill_hopper
